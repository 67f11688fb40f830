package line

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// A line is a parent's sequential children ordered by their sequence suffix:
// the contenders of a lock, the candidates of an election. Locks, semaphores,
// read/write locks and elections share it.

// Place is where a node stands in its line.
type Place struct {
	// Head is true when the node is first in line (holds the lock, leads).
	Head bool
	// Czxid is the node's creation zxid: the fencing token or term it carries.
	Czxid int64
	// Line is the line as last listed, sorted by sequence suffix.
	Line []string
}

// errWaitOver ends a wait for the predecessor when the caller's wait is over.
var errWaitOver = errors.New("wait over")

// lineWait is one wait for a node to reach the head of its line (AwaitHead).
type lineWait struct {
	ctx      context.Context
	ep       *zookeeper.Epoch
	node     string
	parent   string
	self     string
	handoffs *Handoffs // nil where nobody hands a head over (elections)
	ending   <-chan struct{}
	// deadline fires when the caller's wait is over (nil: never); expired tells
	// it without blocking. waitCtx bounds waiting out a suspension likewise.
	deadline <-chan time.Time
	expired  func() bool
	waitCtx  context.Context
	place    Place
}

// AwaitHead waits up to wait (0: look once) until the node c is first among its
// parent's sequential children, watching only its predecessor, so that a release
// wakes one waiter. It returns the place when the node is first or when wait
// ends (Head false); kit.ErrLeaseEnded when ending closes, kit.ErrSessionLost
// when the session is lost or the node vanished, ctx's error when ctx ends. A
// suspended session is waited out within wait; the head is reported only while
// connected under the node's own session, never while suspended.
//
// h is the Handoffs of the line's recipe, through which this sidecar hands the
// head between its own waiters; nil where it never does (an election's line).
//
// Round trips on the hot path: a node made by a stamped create that was alone
// under its parent is the head at once, with the czxid its create's answer
// carried (no node with a lower sequence can appear later). Otherwise the line
// is listed, and a czxid not known yet is read with an exists sent together with
// that listing, so the two cost one round trip. When the predecessor was the head
// of the listed line and is deleted, the node is the head without listing again
// (every node created later has a higher sequence); when this sidecar lets the
// predecessor go as the head, the node is the head at once (Handoffs).
func AwaitHead(ctx context.Context, ep *zookeeper.Epoch, c zookeeper.Created, wait time.Duration, ending <-chan struct{}, h *Handoffs) (Place, error) {
	if c.Alone && c.Czxid != 0 && ep.Connected() {
		// The head at once (as head() would report it), without the wait's
		// timer and context.
		return Place{Head: true, Czxid: c.Czxid, Line: []string{path.Base(c.Path)}}, nil
	}
	return AwaitUnblocked(ctx, ep, c, wait, ending, h, Predecessor)
}

// A Blocker names the node that keeps the node at idx of line waiting: its
// index, or -1 when none does (the node's way is clear).
type Blocker func(line []string, idx int) int

// Predecessor is a lock's Blocker: the node just before it (-1: none, the node
// is the head).
func Predecessor(_ []string, idx int) int { return idx - 1 }

// AwaitUnblocked is AwaitHead for a node that blocker may let through before it
// heads the line (a reader of a read/write lock): it waits up to wait until
// blocker names no node, watching only the one it names. Head is then true.
func AwaitUnblocked(ctx context.Context, ep *zookeeper.Epoch, c zookeeper.Created, wait time.Duration, ending <-chan struct{}, h *Handoffs, blocker Blocker) (Place, error) {
	w, done := newLineWait(ctx, ep, c, wait, ending, h)
	defer done()
	if c.Alone && c.Czxid != 0 {
		w.place.Line = []string{w.self}
		return w.head()
	}
	return w.runUntil(blocker)
}

// newLineWait prepares the wait of node c for up to wait (0: look once); call
// done when the wait is over.
func newLineWait(ctx context.Context, ep *zookeeper.Epoch, c zookeeper.Created, wait time.Duration, ending <-chan struct{}, h *Handoffs) (w *lineWait, done func()) {
	parent, self := path.Split(c.Path)
	w = &lineWait{ctx: ctx, ep: ep, node: c.Path, parent: path.Clean(parent), self: self,
		handoffs: h, ending: ending, waitCtx: ctx, place: Place{Czxid: c.Czxid}}
	w.expired = func() bool { return wait <= 0 }
	if wait <= 0 {
		return w, func() {}
	}
	t := time.NewTimer(wait)
	w.deadline = t.C
	w.expired = func() bool {
		select {
		case <-t.C:
			w.deadline = expiredC
			return true
		default:
			return false
		}
	}
	var cancel context.CancelFunc
	w.waitCtx, cancel = context.WithTimeout(ctx, wait)
	return w, func() { t.Stop(); cancel() }
}

var expiredC = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// runUntil lists the line and waits on the node that blocker names (the index
// of the node, at idx in line, that keeps it waiting; -1 when none does) until
// none does or the wait ends. Head is then true.
func (w *lineWait) runUntil(blocker Blocker) (Place, error) {
	var children []string
	var err error
	if w.place.Czxid == 0 {
		err = zookeeper.Parallel(func() error { children, err = w.list(); return err }, w.readCzxid)
	} else {
		children, err = w.list()
	}
	for {
		if err != nil {
			if !w.retryable(err) {
				return w.place, err
			}
			if err = w.ep.WaitConnected(w.waitCtx); err == nil {
				children, err = w.list()
			}
			continue
		}
		w.place.Line = zookeeper.SortBySeq(children)
		idx := slices.Index(w.place.Line, w.self)
		if idx < 0 {
			return w.place, fmt.Errorf("node %s vanished: %w", w.node, zookeeper.ErrSessionLost)
		}
		b := blocker(w.place.Line, idx)
		switch {
		case b < 0:
			return w.head()
		case w.expired():
			return w.place, nil
		}
		head, err2 := w.awaitPredecessor(b)
		switch {
		case errors.Is(err2, errWaitOver):
			return w.place, nil
		case err2 != nil:
			err = err2
			continue
		case head:
			return w.head()
		}
		children, err = w.list()
	}
}

// retryable tells whether a failure is the session's, to be waited out within
// the wait.
func (w *lineWait) retryable(err error) bool {
	return errors.Is(err, zookeeper.ErrUnavailable) && w.ctx.Err() == nil && !w.expired()
}

func (w *lineWait) list() ([]string, error) {
	children, _, err := w.ep.ChildrenShared(w.ctx, w.parent)
	return children, err
}

func (w *lineWait) readCzxid() error {
	_, st, err := w.ep.Exists(w.ctx, w.node)
	if err == nil && st != nil {
		w.place.Czxid = st.Czxid
	}
	return err
}

// head reports the node as the head, once its czxid is known and its session is
// the connected one.
func (w *lineWait) head() (Place, error) {
	if w.place.Czxid == 0 {
		if err := w.readCzxid(); err != nil {
			return w.place, err
		}
		if w.place.Czxid == 0 {
			return w.place, fmt.Errorf("node %s vanished: %w", w.node, zookeeper.ErrSessionLost)
		}
	}
	if !w.ep.Connected() {
		if err := w.ep.WaitConnected(w.waitCtx); err != nil {
			return w.place, err
		}
	}
	w.place.Head = true
	return w.place, nil
}

// awaitPredecessor waits until the node at b of the line (the one the node
// waits on) goes or is handed over by this sidecar. It tells whether the node's
// way is clear for sure then (that node was the listed head, so every node up
// to this one was let through already, or it handed the head over);
// errWaitOver when the wait ends first.
func (w *lineWait) awaitPredecessor(b int) (bool, error) {
	pred := w.parent + "/" + w.place.Line[b]
	var pw *predecessorWatch
	if w.handoffs != nil {
		var stop func()
		pw, stop = w.handoffs.await(pred)
		defer stop()
	}
	gone, err := w.waitGone(pred, pw)
	if err != nil || !gone {
		return false, err
	}
	return b == 0 || (pw != nil && closed(pw.handed)), nil
}

// LocalGrace is how long a waiter on a node of this sidecar relies on being
// told here (Handoffs) before it sets a ZooKeeper watch on it as well.
const LocalGrace = time.Second

// waitGone waits until pred goes or is handed over, and tells whether it went.
// It watches pred in ZooKeeper (reading the czxid alongside when not known yet),
// at once, or after LocalGrace when pred is this sidecar's own (see Handoffs).
func (w *lineWait) waitGone(pred string, pw *predecessorWatch) (bool, error) {
	var handed, left <-chan struct{}
	if pw != nil {
		handed, left = pw.handed, pw.gone
	}
	if pw != nil && pw.local && w.place.Czxid != 0 {
		grace := time.NewTimer(LocalGrace)
		defer grace.Stop()
		if gone, done, err := w.waitFor(nil, handed, left, grace.C); done {
			return gone, err
		}
	}
	var exists bool
	var watch <-chan zookeeper.Event
	watchPred := func() error {
		var err error
		exists, _, watch, err = w.ep.ExistsW(w.ctx, pred)
		return err
	}
	var err error
	if w.place.Czxid == 0 {
		err = zookeeper.Parallel(watchPred, w.readCzxid)
	} else {
		err = watchPred()
	}
	if err != nil || !exists {
		return !exists, err
	}
	gone, _, err := w.waitFor(watch, handed, left, nil)
	return gone, err
}

// waitFor waits for the first of: pred's watch firing (gone when deleted), pred
// handed over or left here (gone), the caller's wait, context or lease ending,
// the session lost (errors), or more (done false: nothing happened).
func (w *lineWait) waitFor(watch <-chan zookeeper.Event, handed, left <-chan struct{}, more <-chan time.Time) (gone, done bool, err error) {
	select {
	case ev := <-watch:
		return ev.Type == zookeeper.EventNodeDeleted, true, nil
	case <-handed:
		return true, true, nil
	case <-left:
		return true, true, nil
	case <-more:
		return false, false, nil
	case <-w.deadline:
		return false, true, errWaitOver
	case <-w.ctx.Done():
		return false, true, w.ctx.Err()
	case <-w.ending:
		return false, true, kit.ErrLeaseEnded
	case <-w.ep.Lost():
		return false, true, zookeeper.ErrSessionLost
	}
}

// closed tells whether ch is closed (false for nil).
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
