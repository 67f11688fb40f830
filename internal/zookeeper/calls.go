package zookeeper

import (
	"context"
	"errors"
	"fmt"
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
	return callAs(ctx, ep, false, f)
}

// read is call for a request that may be sent twice (a read).
func read[T any](ctx context.Context, ep *Epoch, f func(*zk.Conn) (T, error)) (T, error) {
	return callAs(ctx, ep, true, f)
}

func callAs[T any](ctx context.Context, ep *Epoch, idempotent bool, f func(*zk.Conn) (T, error)) (T, error) {
	var end time.Time
	for {
		v, err := callOnce(ctx, ep, f)
		again, err := ep.resend(ctx, err, idempotent, &end)
		if !again {
			return v, err
		}
	}
}

func callOnce[T any](ctx context.Context, ep *Epoch, f func(*zk.Conn) (T, error)) (T, error) {
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
		v, err = f(ep.conn)
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
func callBy[T any](ep *Epoch, deadline time.Time, f func(*zk.Conn) (T, error)) (T, error) {
	done := make(chan answer[T], 1)
	if !ep.s.Go(func() {
		v, err := f(ep.conn)
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
	reqs := make([]any, len(ops))
	acl := ep.s.acl()
	for i, o := range ops {
		reqs[i] = o.request(acl)
	}
	res, err := call(ctx, ep, func(c *zk.Conn) ([]zk.MultiResponse, error) { return c.Multi(reqs...) })
	return results(res), err
}

func results(res []zk.MultiResponse) []OpResult {
	if res == nil {
		return nil
	}
	out := make([]OpResult, len(res))
	for i, r := range res {
		out[i] = OpResult{Path: r.String, Stat: r.Stat, Err: r.Error}
	}
	return out
}
