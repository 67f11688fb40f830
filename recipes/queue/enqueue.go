package queue

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

const (
	// maxBatch and maxBatchBytes bound one enqueue transaction (ZooKeeper refuses a
	// request above jute.maxbuffer, 1 MiB by default); an item of any allowed size
	// still goes alone.
	maxBatch      = 128
	maxBatchBytes = 768 << 10
	// enqueueAttempts bounds the retries of one batch (stale tails, lost answers).
	enqueueAttempts = 20
	// maxFlushes bounds the transactions of one batcher under way at once: one,
	// so that batches are written in the order their enqueues arrived.
	maxFlushes = 1
)

// Enqueue stores payload with its content type ("" stores DefaultContentType) at
// the end of priority prio (0..MaxPriority) and returns the item's id. The item
// is persistent. Concurrent enqueues to one queue and priority through this
// sidecar are grouped into transactions, written one at a time in the order the
// enqueues arrived. When ctx ends before the item was sent, nothing is stored;
// ErrUnavailable means it may or may not have been stored (the answer was lost
// and the item could not be found again).
func (q *Queues) Enqueue(ctx context.Context, name string, prio int, contentType string, payload []byte) (string, error) {
	contentType, err := checkEnqueue(name, prio, contentType)
	if err != nil {
		return "", err
	}
	if _, err := q.s.Await(ctx); err != nil {
		return "", err
	}
	data, h := encodeItem(contentType, payload)
	token := newToken()
	req := &enqReq{data: data, prefix: itemPrefix(h, token), token: token, done: make(chan struct{})}
	st := q.state(name)
	b := st.batcher(prio)
	b.gc.Submit(req)
	select {
	case <-req.done:
	case <-ctx.Done():
		if b.gc.Withdraw(req) {
			return "", ctx.Err()
		}
		<-req.done // sent already: its outcome is known soon (calls are bounded)
	}
	if req.err != nil {
		return "", req.err
	}
	q.metrics.enqueued.Inc()
	st.enqueued(prio)
	return req.id, nil
}

// enqReq is one enqueue waiting for its transaction.
type enqReq struct {
	data   []byte
	prefix string
	token  string
	// del, for a delayed item come due, is its node under delayed/: the
	// transaction deletes it as it creates the item, so the move happens once.
	del  string
	done chan struct{}
	id   string
	err  error
}

// enqBatcher writes the enqueues of one queue and priority, grouped into
// transactions (zookeeper.GroupCommit, one under way at a time). It remembers the
// tail bucket between transactions.
type enqBatcher struct {
	q    *Queues
	name string
	prio int
	gc   *zookeeper.GroupCommit[*enqReq]

	mu   sync.Mutex // guards tail
	tail int64      // -1 unknown
}

func (st *queueState) batcher(p int) *enqBatcher {
	st.bmu.Lock()
	defer st.bmu.Unlock()
	b := st.batchers[p]
	if b == nil {
		b = &enqBatcher{q: st.q, name: st.name, prio: p, tail: -1}
		b.gc = &zookeeper.GroupCommit[*enqReq]{MaxFlushes: maxFlushes, Take: takeEnqueues, Send: b.write, Owner: st.q.s}
		st.batchers[p] = b
	}
	return b
}

// takeEnqueues bounds one transaction by maxBatch items and maxBatchBytes (an
// item of any allowed size still goes alone). A move of a delayed item goes
// alone: its delete fails when another sidecar moved it first, and that must
// not fail anyone else's enqueue.
func takeEnqueues(pending []*enqReq) int {
	if pending[0].del != "" {
		return 1
	}
	n, size := 0, 0
	for n < len(pending) && n < maxBatch && pending[n].del == "" && (n == 0 || size+len(pending[n].data) <= maxBatchBytes) {
		size += len(pending[n].data)
		n++
	}
	return n
}

// write flushes a batch and answers its requests.
func (b *enqBatcher) write(batch []*enqReq) {
	err := b.flush(batch)
	for _, r := range batch {
		if err != nil {
			r.err = err
		}
		close(r.done)
	}
}

// flushStep is what one attempt at writing a batch decided.
type flushStep int

const (
	flushDone  flushStep = iota // written (or failed for good: see the error)
	flushRetry                  // try again
)

// flush writes one batch: Check(tail is open) + one sequential create per item,
// trying again (at most enqueueAttempts times, within 3 call timeouts) while the
// tail moved or the session is away.
func (b *enqBatcher) flush(batch []*enqReq) error {
	q := b.q
	ctx, cancel := context.WithTimeout(context.Background(), 3*q.s.OpTimeout())
	defer cancel()
	for range enqueueAttempts {
		changed := q.s.Changed()
		ep, err := q.s.Await(ctx)
		if err != nil {
			if errors.Is(err, kit.ErrClosed) || !waitChange(ctx, changed) {
				return err
			}
			continue
		}
		step, err := b.attempt(ctx, ep, batch)
		if step == flushDone {
			return err
		}
	}
	return fmt.Errorf("enqueue to %q: gave up after %d attempts: %w", b.name, enqueueAttempts, kit.ErrUnavailable)
}

// attempt writes the batch once into the cached tail (looked up when unknown).
func (b *enqBatcher) attempt(ctx context.Context, ep *zookeeper.Epoch, batch []*enqReq) (flushStep, error) {
	q := b.q
	bucket := b.getTail()
	if bucket < 0 {
		var err error
		if bucket, err = q.findTail(ctx, ep, b.name, b.prio); err != nil {
			if errors.Is(err, kit.ErrUnavailable) && ctx.Err() == nil {
				return flushRetry, nil
			}
			return flushDone, err
		}
		b.setTail(-1, bucket)
	}
	bp := q.bpath(b.name, b.prio, bucket)
	ops, first := batchOps(bp, batch)
	res, err := ep.Multi(ctx, ops...)
	switch {
	case err == nil:
		return flushDone, b.written(ctx, ep, bucket, batch, res[first:])
	case movedElsewhere(first, res):
		return flushDone, errMovedElsewhere
	case errors.Is(err, zookeeper.ErrBadVersion):
		b.setTail(bucket, bucket+1) // closed: the next one was made with it
	case errors.Is(err, zookeeper.ErrNoNode):
		b.setTail(bucket, -1) // drained and deleted, or a new queue: look it up
	case errors.Is(err, kit.ErrUnavailable), errors.Is(err, kit.ErrSessionLost):
		// The transaction may have been applied: find our items once connected.
		switch b.recover(ctx, bucket, batch) {
		case recovered:
			return flushDone, nil
		case notWritten:
			if ctx.Err() == nil {
				return flushRetry, nil
			}
		}
		return flushDone, fmt.Errorf("queue %q: %w", b.name, kit.ErrUnavailable)
	default:
		return flushDone, fmt.Errorf("enqueue to %q: %w", b.name, err)
	}
	return flushRetry, nil
}

// batchOps is a batch's transaction into bucket path bp: Check(bp is open),
// the delete of a moved delayed item's node, then one sequential create per
// item, whose results start at res[first].
func batchOps(bp string, batch []*enqReq) (ops []zookeeper.Op, first int) {
	ops = make([]zookeeper.Op, 0, len(batch)+2)
	ops = append(ops, zookeeper.CheckOp{Path: bp, Version: 0})
	if move := batch[0].del; move != "" { // alone in its batch (takeEnqueues)
		ops = append(ops, zookeeper.DeleteOp{Path: move, Version: -1})
	}
	first = len(ops)
	for _, r := range batch {
		ops = append(ops, zookeeper.CreateOp{Path: bp + "/" + r.prefix, Data: r.data, Mode: zookeeper.Sequential})
	}
	return ops, first
}

// movedElsewhere tells whether a move's transaction failed on the delete of
// its delayed node: another sidecar moved it first.
func movedElsewhere(first int, res []zookeeper.OpResult) bool {
	return first == 2 && len(res) > 1 && errors.Is(res[1].Err, zookeeper.ErrNoNode)
}

// written records the ids of a batch written into bucket (res: the results of
// its creates), and closes the bucket when it is full.
func (b *enqBatcher) written(ctx context.Context, ep *zookeeper.Epoch, bucket int64, batch []*enqReq, res []zookeeper.OpResult) error {
	top := int64(0)
	for i, r := range batch {
		ref, ok := b.ref(bucket, path.Base(res[i].Path))
		if !ok {
			return fmt.Errorf("queue %q: unexpected node %q", b.name, res[i].Path)
		}
		r.id = ref.key
		top = max(top, ref.seq)
	}
	if top >= bucketSize-1 {
		b.q.closeBucket(ctx, ep, b.name, b.prio, bucket)
		b.setTail(bucket, bucket+1)
	}
	return nil
}

func (b *enqBatcher) getTail() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tail
}

// setTail moves the cached tail from old to next, unless another flush moved it
// meanwhile.
func (b *enqBatcher) setTail(old, next int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tail == old {
		b.tail = next
	}
}

func (b *enqBatcher) ref(bucket int64, name string) (itemRef, bool) {
	seq, _, _, ok := parseItemName(name)
	r := itemRef{prio: b.prio, bucket: bucket, seq: seq, name: name}
	r.key = r.id()
	return r, ok
}

// recovery is what recover found of a batch whose answer was lost.
type recovery int

const (
	notWritten recovery = iota // the batch is not there: send it again
	recovered                  // the batch is there: its ids are set
	unknown                    // it could not be told (ctx ended, or the Session closed)
)

// recover looks for a batch whose answer was lost; the transaction is atomic, so
// finding one item finds them all.
func (b *enqBatcher) recover(ctx context.Context, bucket int64, batch []*enqReq) recovery {
	q := b.q
	for ctx.Err() == nil {
		changed := q.s.Changed()
		ep, err := q.s.Await(ctx)
		if err != nil {
			if errors.Is(err, kit.ErrClosed) || !waitChange(ctx, changed) {
				return unknown
			}
			continue
		}
		if move := batch[0].del; move != "" {
			if rec, ok := recoverMove(ctx, ep, move); ok {
				return rec
			}
			continue
		}
		names, _, err := ep.Children(ctx, q.bpath(b.name, b.prio, bucket))
		if errors.Is(err, kit.ErrUnavailable) || errors.Is(err, kit.ErrSessionLost) {
			continue
		}
		if err != nil {
			return notWritten // gone (drained since, or never made): send again
		}
		byToken := map[string]string{}
		for _, n := range names {
			if _, _, tok, ok := parseItemName(n); ok {
				byToken[tok] = n
			}
		}
		if _, ok := byToken[batch[0].token]; !ok {
			return notWritten
		}
		for _, r := range batch {
			ref, _ := b.ref(bucket, byToken[r.token])
			r.id = ref.key
		}
		return recovered
	}
	return unknown
}

// recoverMove settles a move whose answer was lost: its transaction deleted the
// delayed node if it was applied (or another sidecar's did), so gone means
// moved, once. ok is false when it could not be told yet (the connection).
func recoverMove(ctx context.Context, ep *zookeeper.Epoch, move string) (rec recovery, ok bool) {
	exists, _, err := ep.Exists(ctx, move)
	switch {
	case errors.Is(err, kit.ErrUnavailable) || errors.Is(err, kit.ErrSessionLost):
		return unknown, false
	case err != nil:
		return unknown, true
	case exists:
		return notWritten, true
	}
	return recovered, true
}

func waitChange(ctx context.Context, changed <-chan struct{}) bool {
	select {
	case <-changed:
		return true
	case <-ctx.Done():
		return false
	}
}

// findTail returns the open bucket of priority p, making the queue, the priority
// and the first bucket when missing.
func (q *Queues) findTail(ctx context.Context, ep *zookeeper.Epoch, name string, p int) (int64, error) {
	pp := q.ppath(name, p)
	for range 3 {
		if err := ep.EnsurePersistent(ctx, pp); err != nil {
			return 0, err
		}
		children, _, err := ep.Children(ctx, pp)
		if errors.Is(err, zookeeper.ErrNoNode) {
			// Deleted behind the cache of known paths: make it (and the queue's
			// node, if that went too) again.
			if err := ep.CreateIn(ctx, pp, nil, zookeeper.Persistent); err != nil && !errors.Is(err, zookeeper.ErrNodeExists) {
				return 0, fmt.Errorf("create %s: %w", pp, err)
			}
			continue
		}
		if err != nil {
			return 0, err
		}
		tail := int64(-1)
		for _, ch := range children {
			if b, ok := parseBucket(ch); ok && b > tail {
				tail = b
			}
		}
		if tail >= 0 {
			return tail, nil
		}
		_, err = ep.Create(ctx, q.bpath(name, p, 0), nil, zookeeper.Persistent)
		if err == nil || errors.Is(err, zookeeper.ErrNodeExists) {
			return 0, nil
		}
		if !errors.Is(err, zookeeper.ErrNoNode) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("queue %q: priority %d keeps vanishing: %w", name, p, kit.ErrUnavailable)
}

// closeBucket closes bucket b and opens b+1 in one transaction; someone else
// having done it already is fine.
func (q *Queues) closeBucket(ctx context.Context, ep *zookeeper.Epoch, name string, p int, b int64) {
	_, _ = ep.Multi(ctx,
		zookeeper.SetOp{Path: q.bpath(name, p, b), Data: []byte("closed"), Version: 0},
		zookeeper.CreateOp{Path: q.bpath(name, p, b+1), Mode: zookeeper.Persistent},
	)
}
