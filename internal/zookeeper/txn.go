package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Shared transactions. Independent callers' small writes on one connection (the
// creates and deletes of lock and election contenders) are grouped into one
// ZooKeeper multi (GroupCommit): the server then handles one request, and logs
// one transaction, for many callers. Grouping never changes an outcome:
//   - when the server refuses a shared transaction (one caller's op failed),
//     nothing of it was applied, and each caller's ops are sent again alone;
//   - when its answer is lost or cannot be read, every caller gets
//     ErrUnavailable, as it would alone, and recovers as it would alone (finds
//     its node, or deletes again);
//   - every change of one transaction carries its zxid, so two creates under
//     one parent (whose czxids are fencing tokens and terms) never share a
//     transaction. Such siblings go in transactions of their own sent at once
//     with it (pipelined, up to maxTxnGroups a batch), not one round trip later:
//     on a hot lock every contender's create is under one parent, and the server
//     then logs them with one fsync. Siblings that waited for the same batch
//     (they arrived concurrently, within one round trip of each other) may then
//     get their sequence numbers in either order, as requests of two batches
//     under way at once could already.

// txnReq is one caller's ops waiting for a shared transaction. A caller of up
// to two ops (a create and its stamp, a delete) has them, their requests and
// their answers in the txnReq's own arrays: one allocation for all of it.
type txnReq struct {
	ops    []Op
	opBuf  [2]Op
	key    string // a parent under which no other request of the batch may create, or ""
	bytes  int
	call   multiCall // the multi, when the caller's ops are sent alone
	res    []OpResult
	resBuf [2]OpResult
	err    error

	mu       sync.Mutex
	answered bool
	done     chan struct{} // made only for a caller that has to wait (wait)
}

// wait returns nil when r is answered, or else a channel closed once it is.
func (r *txnReq) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.answered {
		return nil
	}
	if r.done == nil {
		r.done = make(chan struct{})
	}
	return r.done
}

// answer tells r's caller that r.res and r.err are set.
func (r *txnReq) answer() {
	r.mu.Lock()
	r.answered = true
	if r.done != nil {
		close(r.done)
	}
	r.mu.Unlock()
}

// sendAlone sends r's ops as one multi of their own.
func (r *txnReq) sendAlone(ep *Epoch) {
	r.res, r.err = ep.sendOps(&r.call, r.ops, r.resBuf[:0])
}

const (
	// maxTxnOps and maxTxnBytes bound one shared transaction, well below
	// jute.maxbuffer (1 MiB by default).
	maxTxnOps   = 128
	maxTxnBytes = 512 << 10
	// maxTxnFlushes bounds the batches under way at once, and maxTxnGroups the
	// transactions of one batch.
	maxTxnFlushes = 2
	maxTxnGroups  = 8
)

func newTxnWriter(ep *Epoch) *GroupCommit[*txnReq] {
	return &GroupCommit[*txnReq]{MaxFlushes: maxTxnFlushes, Take: takeTxns, Send: ep.sendTxns, Owner: ep.s}
}

// SharedMulti applies ops, all or none, possibly in one transaction with other
// callers' ops (see Shared transactions). key names a parent under which ops
// create a node ("" for none): no other request with that key joins the
// transaction. It returns the answers to ops, and errors as Multi does, except
// that a failure that is not the server's refusal is ErrUnavailable or
// ErrSessionLost: the ops may have been applied.
func (ep *Epoch) SharedMulti(ctx context.Context, key string, ops ...Op) ([]OpResult, error) {
	r := &txnReq{key: key}
	r.ops = append(r.opBuf[:0], ops...) // ops stays the caller's (on its stack)
	return ep.shared(ctx, r)
}

// shared is SharedMulti of r, whose key and ops are set: for a caller that
// allocates r in one piece with the requests its ops point to
// (createProtected, deleteKnown).
func (ep *Epoch) shared(ctx context.Context, r *txnReq) ([]OpResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := ep.AwaitConnected(ctx); err != nil { // through a suspension (WithSuspendWait)
		return nil, err
	}
	for _, op := range r.ops {
		r.bytes += op.size()
	}
	ep.txns.Submit(r) // answers r itself when this caller sends the batch
	if done := r.wait(); done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			if ep.txns.Withdraw(r) {
				return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
			}
			<-done // sent already: its answer comes within the call's timeout
		}
	}
	return r.res, r.err
}

// takeTxn takes pending requests, in order, up to the bounds and up to the
// first one whose key is already in the batch.
func takeTxn(pending []*txnReq) int {
	n, ops, size := 0, 0, 0
	var keys []string
	for ; n < len(pending); n++ {
		r := pending[n]
		if n > 0 && (ops+len(r.ops) > maxTxnOps || size+r.bytes > maxTxnBytes) {
			break
		}
		if r.key != "" {
			if slices.Contains(keys, r.key) {
				break
			}
			keys = append(keys, r.key)
		}
		ops += len(r.ops)
		size += r.bytes
	}
	return n
}

// takeTxns takes pending requests, in order, for up to maxTxnGroups
// transactions (each as takeTxn cuts it).
func takeTxns(pending []*txnReq) int {
	n := 0
	for g := 0; g < maxTxnGroups && n < len(pending); g++ {
		n += takeTxn(pending[n:])
	}
	return n
}

// sendTxns cuts a batch into transactions (takeTxn) and sends them at once,
// pipelined on the connection.
func (ep *Epoch) sendTxns(batch []*txnReq) {
	if takeTxn(batch) == len(batch) { // one transaction (the usual case): sent from here
		ep.sendTxn(batch)
		return
	}
	var sends []func() error
	for len(batch) > 0 {
		n := takeTxn(batch)
		group := batch[:n:n]
		batch = batch[n:]
		sends = append(sends, func() error { ep.sendTxn(group); return nil })
	}
	_ = Parallel(sends...)
}

// sendTxn sends one shared transaction and answers its requests.
func (ep *Epoch) sendTxn(batch []*txnReq) {
	ep.s.metrics.txns.Inc()
	ep.s.metrics.txnRequests.Add(float64(len(batch)))
	if len(batch) == 1 {
		batch[0].sendAlone(ep)
		batch[0].answer()
		return
	}
	n := 0
	for _, r := range batch {
		n += len(r.ops)
	}
	ops := make([]Op, 0, n) // one array, not one per doubling
	for _, r := range batch {
		ops = append(ops, r.ops...)
	}
	res, err := ep.sendOps(new(multiCall), ops, nil)
	switch {
	case err == nil:
		for _, r := range batch {
			r.res, res = res[:len(r.ops):len(r.ops)], res[len(r.ops):]
		}
	case refused(res, len(ops)):
		// Nothing was applied: each caller's ops alone, pipelined.
		alone := make([]func() error, len(batch))
		for i, r := range batch {
			alone[i] = func() error {
				r.sendAlone(ep)
				return nil
			}
		}
		_ = Parallel(alone...)
	default:
		for _, r := range batch {
			r.err = err
		}
	}
	for _, r := range batch {
		r.answer()
	}
}

// refused tells whether a failed multi was refused by the server, which then
// answers every op (one of them with its error) and applies none.
func refused(res []OpResult, ops int) bool {
	if len(res) != ops {
		return false
	}
	for _, r := range res {
		if r.Err != nil {
			return true
		}
	}
	return false
}

// sendOps sends ops as one multi through m (see multi, and out), with errors as
// Multi gives them, except that a failure that is not the server's refusal (a
// lost answer, or one that could not be read) is ErrUnavailable or
// ErrSessionLost: the ops may have been applied, and callers recover as from a
// lost answer.
func (ep *Epoch) sendOps(m *multiCall, ops []Op, out []OpResult) ([]OpResult, error) {
	res, err := ep.multi(context.Background(), m, ops, out) // bounded by OpTimeout
	switch {
	case err == nil && len(res) != len(ops):
		err = fmt.Errorf("%w: a transaction of %d ops answered with %d results", ErrUnavailable, len(ops), len(res))
	case err == nil, refused(res, len(ops)), errors.Is(err, ErrUnavailable), errors.Is(err, ErrSessionLost):
	default:
		err = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return res, err
}

// Parallel runs the functions at once and returns the first error. Calls on one
// ZooKeeper connection are pipelined, so two calls cost one round trip.
func Parallel(fns ...func() error) error {
	switch len(fns) {
	case 0:
		return nil
	case 1:
		return fns[0]()
	}
	errs := make(chan error, len(fns))
	for _, f := range fns[1:] {
		go func() { errs <- f() }()
	}
	first := fns[0]()
	for range fns[1:] {
		if err := <-errs; first == nil {
			first = err
		}
	}
	return first
}

// GroupCommit sends requests in batches: each batch carries requests in the
// order they arrived, everything that arrived while earlier batches were under
// way, and at most MaxFlushes batches are under way at once, so batches may be
// answered in any order. A caller that finds a free flush slot sends the batch
// itself, on its own goroutine, so a lone request goes out without a hand-off;
// what is left pending after that goes on in a goroutine of the Session given
// as Owner, which Session.Close waits for (or, once it is closing, on the
// caller's, where every call fails at once: nothing is left unanswered).
type GroupCommit[R comparable] struct {
	// MaxFlushes bounds the batches under way at once (>= 1).
	MaxFlushes int
	// Take returns how many of pending (never empty) the next batch carries (>= 1).
	Take func(pending []R) int
	// Send sends one batch and answers each of its requests. It keeps neither
	// batch nor a slice of it once it returns: the batch's array is then reused
	// for later requests.
	Send func(batch []R)
	// Owner runs the goroutines that drain what is left pending.
	Owner *Session

	mu       sync.Mutex
	pending  []R
	spare    [][]R // arrays of batches sent, cleared, for pending to reuse
	flushing int
}

// maxSpare bounds the arrays a GroupCommit keeps for reuse: one more than the
// batches usually under way.
const maxSpare = 3

// Submit queues r to be sent; Send answers it.
func (g *GroupCommit[R]) Submit(r R) {
	g.mu.Lock()
	g.pending = append(g.pending, r)
	lead := g.flushing < g.MaxFlushes
	if lead {
		g.flushing++
	}
	g.mu.Unlock()
	if !lead {
		return
	}
	batch, buf := g.next()
	if batch == nil {
		return
	}
	g.Send(batch)
	g.mu.Lock()
	g.reuse(buf)
	more := len(g.pending) > 0
	if !more {
		g.flushing--
	}
	g.mu.Unlock()
	if more && !g.Owner.Go(g.run) {
		g.run() // the Session is closing: its calls fail at once, answering everyone
	}
}

// Withdraw removes r if it was not taken into a batch yet, and tells whether it
// did: when it did not, r is (being) sent and Send will answer it.
func (g *GroupCommit[R]) Withdraw(r R) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, p := range g.pending {
		if p == r {
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
			return true
		}
	}
	return false
}

// run sends batches until nothing is pending.
func (g *GroupCommit[R]) run() {
	for {
		batch, buf := g.next()
		if batch == nil {
			return
		}
		g.Send(batch)
		g.mu.Lock()
		g.reuse(buf)
		g.mu.Unlock()
	}
}

// next takes the next batch off pending; with nothing pending, the caller stops
// being a flusher and gets nil. buf is the batch's whole array, for reuse once
// the batch is sent: pending never shares an array with a batch.
func (g *GroupCommit[R]) next() (batch, buf []R) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.flushing--
		return nil, nil
	}
	n := min(max(g.Take(g.pending), 1), len(g.pending))
	buf = g.pending
	var rest []R
	if k := len(g.spare); k > 0 {
		rest, g.spare[k-1] = g.spare[k-1], nil
		g.spare = g.spare[:k-1]
	}
	g.pending = append(rest, buf[n:]...)
	return buf[:n:n], buf
}

// reuse keeps the array of a batch sent for pending's next array, cleared
// (its requests are answered: nothing of them is kept). Called with mu held.
func (g *GroupCommit[R]) reuse(buf []R) {
	buf = buf[:cap(buf)]
	clear(buf)
	if len(g.spare) < maxSpare {
		g.spare = append(g.spare, buf[:0])
	}
}
