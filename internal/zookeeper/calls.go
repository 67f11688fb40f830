package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Stat is a node's metadata (czxid, mzxid, pzxid, versions, ephemeral owner, ...).
type Stat = zk.Stat

// Event is a watch firing (or, with Type EventNotWatching, a watch dropped with
// its session).
type Event = zk.Event

// Event types recipes look at.
const (
	EventNodeDeleted  = zk.EventNodeDeleted
	EventNotWatching  = zk.EventNotWatching
	EventNodeCreated  = zk.EventNodeCreated
	EventNodeChildren = zk.EventNodeChildrenChanged
)

// Create modes.
const (
	Persistent          = int32(zk.FlagPersistent)
	Ephemeral           = int32(zk.FlagEphemeral)
	Sequential          = int32(zk.FlagSequence)
	EphemeralSequential = int32(zk.FlagEphemeralSequential)
	Container           = int32(zk.FlagContainer)
)

// How an Epoch calls ZooKeeper, in one place: every call goes through call
// or read (fail fast, one deadline, a wait through a suspension, a read sent
// again); then the calls themselves (Get, GetW, ..., Create, Multi), the
// background slots of the reads the sidecar makes for itself (Background), and
// the gone watches, the one watched read the epoch keeps on its own (WatchGone).

// call runs f on this epoch's connection and returns what f returned. It fails
// fast, without calling, when ctx has ended or the epoch is not the connected
// one. A connection error comes back as ErrUnavailable, an expired session as
// ErrSessionLost, ZooKeeper's answers (ErrNoNode, ...) as they are.
//
// Deadline: the call returns by ctx's deadline or OpTimeout from now, whichever is
// sooner (then ErrUnavailable: the request may still be applied). It runs on the
// caller's goroutine (no hop on the hot path) whenever that deadline is no sooner
// (give or take callSlack) than the bound go-zookeeper keeps by itself: a sent request fails when its
// connection drops (a silent partition is detected within 2/3 of the session
// timeout), and a request queued while disconnected waits at most until
// go-zookeeper has tried every server once (it fails its unsent requests then)
// or the Session closes. A sooner deadline is kept by running f on a goroutine the Session owns,
// whose late answer is dropped. Cancelling ctx without a deadline does not cut a
// call already sent short: the answer to a write matters more than the caller's
// patience.
//
// Under a context of WithSuspendWait (suspendwait.go), a call made while ep is
// suspended waits for its connection to come back before it is sent, and one
// that go-zookeeper gave up before sending it is sent again once it is back;
// read does that for a read whose answer was lost too.
func call[T any](ctx context.Context, ep *Epoch, f func(*zk.Conn) (T, error)) (T, error) {
	return callAs[T](ctx, ep, false, callFunc[T](f))
}

// read is call for a request that may be sent twice (a read).
func read[T any](ctx context.Context, ep *Epoch, f func(*zk.Conn) (T, error)) (T, error) {
	return callAs[T](ctx, ep, true, callFunc[T](f))
}

// request is what call sends: a function (callFunc), or a value already on
// the heap whose send method needs no closure made per call (multiCall). send
// may run more than once (a request sent again) and on another goroutine
// (callBy).
type request[T any] interface {
	send(c *zk.Conn) (T, error)
}

// callFunc is a function as a request.
type callFunc[T any] func(*zk.Conn) (T, error)

func (f callFunc[T]) send(c *zk.Conn) (T, error) { return f(c) }

func callAs[T any](ctx context.Context, ep *Epoch, idempotent bool, f request[T]) (T, error) {
	var end time.Time
	for {
		v, err := callOnce(ctx, ep, f)
		again, err := ep.resend(ctx, err, idempotent, &end)
		if !again {
			return v, err
		}
	}
}

func callOnce[T any](ctx context.Context, ep *Epoch, f request[T]) (T, error) {
	var zero T
	if ep.IsLost() {
		return zero, ErrSessionLost
	}
	if err := ctx.Err(); err != nil {
		return zero, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if err := ep.AwaitConnected(ctx); err != nil {
		return zero, err
	}
	// The budget is compared, not a deadline read back later: with OpTimeout
	// equal to the session timeout (the default), that would be a few µs short
	// and send every call through callBy's goroutine. For the same reason a
	// context made with OpTimeout just before the call counts as OpTimeout
	// (callSlack).
	budget := ep.s.cfg.OpTimeout
	if d, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(d))
	}
	deadline := time.Now().Add(budget)
	sent := time.Now()
	var v T
	var err error
	if budget >= ep.SessionTimeout()-callSlack {
		v, err = f.send(ep.conn)
	} else {
		v, err = callBy(ep, deadline, f)
	}
	if err == nil || IsAnswer(err) {
		ep.touch(sent)
	}
	if ep.IsLost() && err != nil && !IsAnswer(err) {
		return v, fmt.Errorf("%w: %w", ErrSessionLost, err)
	}
	return v, mapError(err)
}

// callSlack is how much sooner than go-zookeeper's own bound a deadline may be
// and still be left to that bound: such a call may end up to callSlack after
// its deadline.
const callSlack = 5 * time.Millisecond

var errDeadline = errors.New("no answer before the call's deadline")

type answer[T any] struct {
	v   T
	err error
}

// callBy runs f on a goroutine of the Session and waits for its answer until
// deadline. Once the Session is closing it sends nothing: every epoch is lost.
func callBy[T any](ep *Epoch, deadline time.Time, f request[T]) (T, error) {
	done := make(chan answer[T], 1)
	if !ep.s.Go(func() {
		v, err := f.send(ep.conn)
		done <- answer[T]{v, err}
	}) {
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrSessionLost, ErrClosed)
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case a := <-done:
		return a.v, a.err
	case <-t.C:
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrUnavailable, errDeadline)
	}
}

// node is what a read answers about one node.
type node struct {
	data     []byte
	children []string
	stat     *Stat
	ok       bool
	watch    <-chan Event
}

// Get reads a node's data and stat.
func (ep *Epoch) Get(ctx context.Context, p string) ([]byte, *Stat, error) {
	n, err := read(ctx, ep, func(c *zk.Conn) (n node, err error) {
		n.data, n.stat, err = c.Get(p)
		return n, err
	})
	return n.data, n.stat, err
}

// ChildData is one child read by GetEach: its data and stat; Stat is nil when
// the child was deleted before it could be read.
type ChildData struct {
	Data []byte
	Stat *Stat
}

// GetEach reads each named child of dir at once (the calls are pipelined on
// the session's connection: about one round trip for all), in names' order. A
// child deleted meanwhile has a nil Stat; any other error is returned (the
// first one).
func (ep *Epoch) GetEach(ctx context.Context, dir string, names []string) ([]ChildData, error) {
	out := make([]ChildData, len(names))
	fns := make([]func() error, len(names))
	for i, n := range names {
		fns[i] = func() error {
			data, st, err := ep.Get(ctx, dir+"/"+n)
			if errors.Is(err, ErrNoNode) {
				return nil
			}
			out[i] = ChildData{Data: data, Stat: st}
			return err
		}
	}
	return out, Parallel(fns...)
}

// GetW reads a node's data and stat and leaves a watch on them.
func (ep *Epoch) GetW(ctx context.Context, p string) ([]byte, *Stat, <-chan Event, error) {
	n, err := read(ctx, ep, func(c *zk.Conn) (n node, err error) {
		n.data, n.stat, n.watch, err = c.GetW(p)
		return n, err
	})
	return n.data, n.stat, n.watch, err
}

// Children lists a node's children (unsorted) and returns its stat.
func (ep *Epoch) Children(ctx context.Context, p string) ([]string, *Stat, error) {
	n, err := read(ctx, ep, func(c *zk.Conn) (n node, err error) {
		n.children, n.stat, err = c.Children(p)
		return n, err
	})
	return n.children, n.stat, err
}

// ChildrenW lists a node's children and leaves a watch on the list.
func (ep *Epoch) ChildrenW(ctx context.Context, p string) ([]string, *Stat, <-chan Event, error) {
	n, err := read(ctx, ep, func(c *zk.Conn) (n node, err error) {
		n.children, n.stat, n.watch, err = c.ChildrenW(p)
		return n, err
	})
	return n.children, n.stat, n.watch, err
}

// Exists tells whether a node exists, with its stat when it does.
func (ep *Epoch) Exists(ctx context.Context, p string) (bool, *Stat, error) {
	n, err := read(ctx, ep, func(c *zk.Conn) (n node, err error) {
		n.ok, n.stat, err = c.Exists(p)
		return n, err
	})
	return n.ok, n.stat, err
}

// ExistsW is Exists leaving a watch that fires when the node is created,
// changed or deleted.
func (ep *Epoch) ExistsW(ctx context.Context, p string) (bool, *Stat, <-chan Event, error) {
	n, err := read(ctx, ep, func(c *zk.Conn) (n node, err error) {
		n.ok, n.stat, n.watch, err = c.ExistsW(p)
		return n, err
	})
	return n.ok, n.stat, n.watch, err
}

// Create creates a node with the session's ACL and returns its path (with the
// sequence suffix of a sequential node). Mode Container makes a container node.
func (ep *Epoch) Create(ctx context.Context, p string, data []byte, mode int32) (string, error) {
	return call(ctx, ep, func(c *zk.Conn) (string, error) {
		if mode == Container {
			return c.CreateContainer(p, data, zk.FlagContainer, ep.s.acl())
		}
		return c.Create(p, data, mode, ep.s.acl())
	})
}

// Sync makes the server ep is connected to catch up with the ensemble's
// leader on p before ep's next read (ZooKeeper's sync): what a successor does
// before it trusts what it reads after resuming a session.
func (ep *Epoch) Sync(ctx context.Context, p string) error {
	_, err := read(ctx, ep, func(c *zk.Conn) (string, error) { return c.Sync(p) })
	return err
}

// Set writes a node's data if its version is version (-1: any) and returns the
// new stat.
func (ep *Epoch) Set(ctx context.Context, p string, data []byte, version int32) (*Stat, error) {
	return call(ctx, ep, func(c *zk.Conn) (*Stat, error) { return c.Set(p, data, version) })
}

// Delete deletes a node if its version is version (-1: any).
func (ep *Epoch) Delete(ctx context.Context, p string, version int32) error {
	_, err := call(ctx, ep, func(c *zk.Conn) (struct{}, error) { return struct{}{}, c.Delete(p, version) })
	return err
}

// Op is one operation of a transaction: CreateOp, SetOp, DeleteOp or CheckOp.
type Op interface {
	request(acl []zk.ACL) any
	size() int
}

// CreateOp creates Path (mode: Persistent, Ephemeral, ..., with the sequence
// flag for a sequential node).
type CreateOp struct {
	Path string
	Data []byte
	Mode int32
}

// SetOp writes Path's data if its version is Version (-1: any).
type SetOp struct {
	Path    string
	Data    []byte
	Version int32
}

// DeleteOp deletes Path if its version is Version (-1: any).
type DeleteOp struct {
	Path    string
	Version int32
}

// CheckOp fails the transaction unless Path's version is Version.
type CheckOp struct {
	Path    string
	Version int32
}

func (o CreateOp) request(acl []zk.ACL) any {
	return &zk.CreateRequest{Path: o.Path, Data: o.Data, Acl: acl, Flags: o.Mode}
}
func (o SetOp) request([]zk.ACL) any {
	return &zk.SetDataRequest{Path: o.Path, Data: o.Data, Version: o.Version}
}
func (o DeleteOp) request([]zk.ACL) any {
	return &zk.DeleteRequest{Path: o.Path, Version: o.Version}
}
func (o CheckOp) request([]zk.ACL) any {
	return &zk.CheckVersionRequest{Path: o.Path, Version: o.Version}
}

// The lock cycle's ops (a protected create, its stamp, a delete) are made as
// go-zookeeper's requests at once, each in an op of one pointer: boxed as an Op,
// and then as Multi's request, without an allocation of either (a CreateOp is
// three words: an Op of it is a copy on the heap, and its request another).
type (
	createRequest struct{ r *zk.CreateRequest }
	setRequest    struct{ r *zk.SetDataRequest }
	deleteRequest struct{ r *zk.DeleteRequest }
)

func (o createRequest) request([]zk.ACL) any { return o.r }
func (o setRequest) request([]zk.ACL) any    { return o.r }
func (o deleteRequest) request([]zk.ACL) any { return o.r }
func (o createRequest) size() int            { return len(o.r.Path) + len(o.r.Data) + 64 }
func (o setRequest) size() int               { return len(o.r.Path) + len(o.r.Data) + 32 }
func (o deleteRequest) size() int            { return len(o.r.Path) + 32 }

func (o CreateOp) size() int { return len(o.Path) + len(o.Data) + 64 }
func (o SetOp) size() int    { return len(o.Path) + len(o.Data) + 32 }
func (o DeleteOp) size() int { return len(o.Path) + 32 }
func (o CheckOp) size() int  { return len(o.Path) + 32 }

// OpResult is the answer to one Op of a transaction: the created path of a
// CreateOp, the new stat of a SetOp, and the op's error when the transaction
// was refused (ErrNoNode, ErrBadVersion, ...; nil for the ops that were fine).
type OpResult struct {
	Path string
	Stat *Stat
	Err  error
}

// FailedOp returns the index of the op of a refused transaction whose error is
// err (errors.Is), or -1.
func FailedOp(res []OpResult, err error) int {
	for i, r := range res {
		if r.Err != nil && errors.Is(r.Err, err) {
			return i
		}
	}
	return -1
}

// Multi applies ops, all or none, in one transaction of its own. A refused
// transaction answers every op (the failing one with its error) and the error
// of the failing op; see SharedMulti for transactions shared between callers.
func (ep *Epoch) Multi(ctx context.Context, ops ...Op) ([]OpResult, error) {
	return ep.multi(ctx, new(multiCall), ops, nil)
}

// multiCall is one multi's requests; call sends it without a closure.
type multiCall struct {
	reqs []any
	buf  [2]any // the requests of a multi of up to two ops (a create and its stamp): no slice made
}

func (m *multiCall) send(c *zk.Conn) ([]zk.MultiResponse, error) { return c.Multi(m.reqs...) }

// multi is Multi sending ops through m (not used before: a shared
// transaction's request brings its own); the answers are put in out when it
// has room for them (a shared transaction's request's own array), in a slice
// made for them otherwise.
func (ep *Epoch) multi(ctx context.Context, m *multiCall, ops []Op, out []OpResult) ([]OpResult, error) {
	acl := ep.s.acl()
	m.reqs = m.buf[:0]
	if len(ops) > len(m.buf) {
		m.reqs = make([]any, 0, len(ops))
	}
	for _, o := range ops {
		m.reqs = append(m.reqs, o.request(acl))
	}
	res, err := callAs[[]zk.MultiResponse](ctx, ep, false, m)
	return results(res, out), err
}

// results turns go-zookeeper's answers into OpResults, in out when it has
// room for them.
func results(res []zk.MultiResponse, out []OpResult) []OpResult {
	if res == nil {
		return nil
	}
	if cap(out) >= len(res) {
		out = out[:len(res)]
	} else {
		out = make([]OpResult, len(res))
	}
	for i, r := range res {
		out[i] = OpResult{Path: r.String, Stat: r.Stat, Err: r.Error}
	}
	return out
}

// Waiting for the connection: a call made while its epoch is suspended waits
// for the connection to come back, as its context allows (WithSuspendWait),
// before it is sent, and again before it is sent a second time.

// suspendBound is the instant by which a wait beginning at now must end; ok is
// false when ctx allows none.
func suspendBound(ctx context.Context, now time.Time) (end time.Time, ok bool) {
	sw, ok := suspendWaitOf(ctx)
	if !ok {
		return time.Time{}, false
	}
	end = now.Add(sw.wait)
	if sw.until.After(end) {
		end = sw.until
	}
	return end, end.After(now)
}

// AwaitConnected returns nil when ep is the connected session. While it is
// not and ctx allows it (WithSuspendWait), it waits for ep's connection to
// come back: ErrSessionLost when ep is lost first, ErrUnavailable naming the
// servers and the last connection error when the allowance ends first. Without
// the allowance it returns ErrUnavailable (ErrSessionLost once ep is lost) at
// once.
func (ep *Epoch) AwaitConnected(ctx context.Context) error {
	if ep.Connected() {
		return nil
	}
	if ep.IsLost() {
		return ErrSessionLost
	}
	end, ok := suspendBound(ctx, time.Now())
	if !ok {
		return fmt.Errorf("session not connected: %w", ErrUnavailable)
	}
	return ep.awaitUntil(ctx, end)
}

// awaitUntil waits until ep is connected (nil), lost (ErrSessionLost), end
// (notBack's ErrUnavailable) or ctx's end (ErrUnavailable wrapping its error).
func (ep *Epoch) awaitUntil(ctx context.Context, end time.Time) error {
	if ep.Connected() {
		return nil
	}
	start := time.Now()
	ep.s.waits.begin()
	wctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	err := ep.WaitConnected(wctx)
	switch {
	case err == nil:
		ep.s.waits.observe(outcomeBack, start)
	case errors.Is(err, ErrSessionLost):
		ep.s.waits.observe(outcomeLost, start)
	case ctx.Err() != nil:
		ep.s.waits.observe(outcomeGone, start)
	default:
		ep.s.waits.observe(outcomeTimeout, start)
		err = ep.s.notBack(start)
	}
	return err
}

// resend tells whether a call that failed with mapped (mapError's, which
// keeps go-zookeeper's error) may be sent again once ep's connection is back, and waits
// for that: the request was never sent (zk.ErrNoServer), or it is a read; and
// ctx allows waiting through a suspension (until end, fixed at the first
// failure). It reports false, with the error to return, when the call is
// done.
func (ep *Epoch) resend(ctx context.Context, mapped error, idempotent bool, end *time.Time) (bool, error) {
	if !mayResend(ctx, mapped, idempotent) {
		return false, mapped
	}
	now := time.Now()
	if end.IsZero() {
		var ok bool
		if *end, ok = suspendBound(ctx, now); !ok {
			return false, mapped
		}
	}
	if !now.Before(*end) {
		return false, mapped
	}
	wasConnected := ep.Connected()
	if err := ep.awaitUntil(ctx, *end); err != nil {
		if errors.Is(err, ErrSessionLost) {
			return false, fmt.Errorf("%w (after: %w)", ErrSessionLost, mapped)
		}
		return false, err
	}
	if wasConnected && !pause(ctx, 10*time.Millisecond) {
		// The Session had not yet applied the disconnection (or the call was
		// cut off by its deadline while connected): it paused rather than spin.
		return false, mapped
	}
	return true, nil
}

// mayResend tells whether a call that failed with mapped may be sent again
// once the connection is back: it failed for want of a connection, the
// session is not lost, no wait through the suspension was already spent, ctx
// lives, and the request was never sent (zk.ErrNoServer) or is idempotent (a
// request sent may have been applied).
func mayResend(ctx context.Context, mapped error, idempotent bool) bool {
	if mapped == nil || !errors.Is(mapped, ErrUnavailable) || errors.Is(mapped, ErrSessionLost) ||
		errors.Is(mapped, errNotBack) || ctx.Err() != nil {
		return false
	}
	return idempotent || errors.Is(mapped, zk.ErrNoServer)
}

// pause waits d, false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// DefaultBackgroundReads is how many background reads (Session.Background) run
// at once when Config.BackgroundReads is not set.
const DefaultBackgroundReads = 64

// Background runs read, a read the sidecar makes for itself rather than for a
// client waiting on it (a follower reading its state at its start, after a watch
// fired or under a new session), once one of the Session's background slots is
// free: at most Config.BackgroundReads run at once. A burst of them, such as the
// whole picture's first read of 10,000 things, then waits here, a few calls at a
// time on the connection, instead of in the connection's queue, where every
// other call would wait behind all of it: clients' own calls, and the
// heartbeat's read, whose answer keeps the session out of doubt (a suspension
// then lasts until 2/3 of the session timeout after it: see heartbeats). read's
// own calls are bounded as any call is. When ctx ends before a slot is free,
// read is not run and the error wraps ErrUnavailable and ctx's error.
func (s *Session) Background(ctx context.Context, read func() error) error {
	select {
	case s.background <- struct{}{}:
	default:
		s.metrics.backgroundWaiting.Inc()
		select {
		case s.background <- struct{}{}:
			s.metrics.backgroundWaiting.Dec()
		case <-ctx.Done():
			s.metrics.backgroundWaiting.Dec()
			return fmt.Errorf("%w: waiting for a background read slot: %w", ErrUnavailable, ctx.Err())
		}
	}
	defer func() { <-s.background }()
	return read()
}

// Gone watches: how a holder learns that its node was deleted by another hand
// than its own release (an operator, a client with rights on the parent, a
// bug). ZooKeeper's recipes say that a holder whose node is gone has lost what
// the node stood for; without a watch on the node it would never know.
//
// A gone watch is one data watch on the node (getData with a watch: on a
// missing node it fails and leaves no watch behind, where exists would leave a
// creation watch on a node that is never created again). Its events reach the
// Session's event callback with their path, so a watch costs an entry in a map
// here, not a goroutine: a goroutine runs only to arm it, and to call gone.
//
// The watch is armed GoneArmDelay after WatchGone, not at once: arming is one
// more request per grant, which a lock cycle of a few milliseconds would pay
// every time (measured: 3 requests per uncontended cycle instead of 2, and the
// end of the shared transactions' batching under 16 and 64 clients). A hold
// let go within the delay never pays it. A node deleted before its watch is
// armed is found missing by the arming read itself, so a loss is still told, at
// most GoneArmDelay+goneArmQuantum (and one round trip) after it happened.
//
// The watches waiting for their delay share one timer of the epoch (not one
// each: a timer made and stopped per grant is two updates of the runtime's
// timer heap for a hold that mostly ends first). It runs at most every
// goneArmQuantum and arms every watch whose delay is over, so a watch is armed
// between GoneArmDelay and GoneArmDelay+goneArmQuantum after WatchGone.

// GoneArmDelay is how long after WatchGone its watch is armed, at the least.
const GoneArmDelay = 250 * time.Millisecond

// goneArmQuantum is how much later than GoneArmDelay a watch may be armed:
// the shared timer runs at most this often.
const goneArmQuantum = GoneArmDelay / 5

// Gone is told of a watched node's deletion (WatchGone): a value the watcher
// has already (kit's entry of a hold), not a closure made per watch.
type Gone interface {
	// NodeGone is called, once, with the deleted node's path.
	NodeGone(p string)
}

// GoneFunc is a function as a Gone.
type GoneFunc func(p string)

func (f GoneFunc) NodeGone(p string) { f(p) }

// goneWatch is one watched node of an epoch, kept by value in the epoch's map:
// id (unique in the epoch) tells it from a later watch of the same path.
type goneWatch struct {
	gone Gone
	id   uint64
}

// dueGone is a watch waiting for its delay until due: armed then if it is
// still p's.
type dueGone struct {
	p   string
	id  uint64
	due time.Time
}

// goneWatches are an epoch's gone watches, by path, and those waiting to be
// armed, in the order of their due times; armer, set while any wait, arms
// them (armDue).
type goneWatches struct {
	mu       sync.Mutex
	m        map[string]goneWatch
	lastID   uint64
	waiting  []dueGone
	armer    *time.Timer
	armerSet bool
}

// WatchGone tells gone (NodeGone), once, on a goroutine the Session owns, when the node at
// p is deleted while this epoch's session lives, or when arming the watch finds
// it missing already. The watch is armed GoneArmDelay (to GoneArmDelay +
// goneArmQuantum) later, on a goroutine the Session owns, so WatchGone returns
// at once; it is armed again after a change of the node's data, and retried
// while the session is suspended. UnwatchGone(p) ends it: a deletion seen after
// UnwatchGone calls nothing, so an owner that deletes its own node calls
// UnwatchGone first. A second WatchGone of p replaces the first. Nothing is
// called after the session is lost (its ephemeral nodes went with it: the
// owner learns that from Lost).
func (ep *Epoch) WatchGone(p string, gone Gone) {
	due := time.Now().Add(GoneArmDelay)
	g := &ep.gone
	g.mu.Lock()
	if g.m == nil {
		g.m = map[string]goneWatch{}
	}
	g.lastID++
	g.m[p] = goneWatch{gone: gone, id: g.lastID} // (a watch replaced is not armed: it is no longer p's)
	g.waiting = append(g.waiting, dueGone{p, g.lastID, due})
	if !g.armerSet {
		g.armerSet = true
		if g.armer == nil {
			g.armer = time.AfterFunc(GoneArmDelay, ep.armDue)
		} else {
			g.armer.Reset(GoneArmDelay)
		}
	}
	g.mu.Unlock()
}

// armDue arms the waiting watches whose delay is over and are still their
// node's, and sets the timer for the next ones (at least goneArmQuantum on).
func (ep *Epoch) armDue() {
	g := &ep.gone
	var due []dueGone
	g.mu.Lock()
	now := time.Now()
	n := 0
	for ; n < len(g.waiting) && !g.waiting[n].due.After(now); n++ {
		if d := g.waiting[n]; g.watchingLocked(d.p, d.id) {
			due = append(due, d)
		}
	}
	left := copy(g.waiting, g.waiting[n:])
	clear(g.waiting[left:])
	g.waiting = g.waiting[:left]
	if left > 0 {
		g.armer.Reset(max(g.waiting[0].due.Sub(now), goneArmQuantum))
	} else {
		g.armerSet = false
	}
	g.mu.Unlock()
	if ep.IsLost() {
		return
	}
	for _, d := range due {
		ep.s.Go(func() { ep.armGone(d.p, d.id) })
	}
}

// UnwatchGone ends the gone watch of p, if any. (A data watch already left in
// ZooKeeper fires once more, at the node's deletion, and is ignored.)
func (ep *Epoch) UnwatchGone(p string) {
	ep.gone.mu.Lock()
	delete(ep.gone.m, p) // (its place among the waiting is skipped when due)
	ep.gone.mu.Unlock()
}

// watching tells whether the watch id is still p's gone watch.
func (ep *Epoch) watching(p string, id uint64) bool {
	ep.gone.mu.Lock()
	defer ep.gone.mu.Unlock()
	return ep.gone.watchingLocked(p, id)
}

// watchingLocked is watching with g.mu held.
func (g *goneWatches) watchingLocked(p string, id uint64) bool {
	w, ok := g.m[p]
	return ok && w.id == id
}

// fireGone tells the watch id's Gone, once, if it is still p's watch.
func (ep *Epoch) fireGone(p string, id uint64) {
	ep.gone.mu.Lock()
	w, ok := ep.gone.m[p]
	if !ok || w.id != id {
		ep.gone.mu.Unlock()
		return
	}
	delete(ep.gone.m, p)
	ep.gone.mu.Unlock()
	if !ep.IsLost() {
		w.gone.NodeGone(p)
	}
}

// armGone sets the data watch on p: it returns once the watch is set, the node
// is found missing (gone is called), the watch was ended, or the session is
// lost. While the session is suspended it tries again, a little later each
// time. It runs in a background slot: a burst of grants arms its watches a few
// at a time on the connection, behind the clients' own calls.
func (ep *Epoch) armGone(p string, id uint64) {
	wait := 50 * time.Millisecond
	for ep.watching(p, id) && !ep.IsLost() {
		ctx, cancel := context.WithTimeout(context.Background(), ep.s.cfg.OpTimeout)
		err := ep.s.Background(ctx, func() error {
			_, _, _, err := ep.GetW(ctx, p)
			return err
		})
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, ErrNoNode):
			ep.fireGone(p, id)
			return
		case errors.Is(err, ErrSessionLost):
			return
		}
		select {
		case <-ep.lost:
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// goneEvent is the Session's event callback for node events: it never blocks.
func (ep *Epoch) goneEvent(ev zk.Event) {
	ep.gone.mu.Lock()
	w, ok := ep.gone.m[ev.Path]
	ep.gone.mu.Unlock()
	if !ok {
		return
	}
	switch ev.Type {
	case zk.EventNodeDeleted:
		ep.s.Go(func() { ep.fireGone(ev.Path, w.id) })
	case zk.EventNodeDataChanged:
		// The watch fired on a change of data: the node lives; watch it again.
		ep.s.Go(func() { ep.armGone(ev.Path, w.id) })
	}
}
