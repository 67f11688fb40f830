package zookeeper

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

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
// most GoneArmDelay (and one round trip) after it happened.

// GoneArmDelay is how long after WatchGone its watch is armed.
const GoneArmDelay = 250 * time.Millisecond

// goneWatch is one watched node of an epoch.
type goneWatch struct {
	gone func()
	// arm is the timer that arms the watch; UnwatchGone stops it.
	arm *time.Timer
}

// goneWatches are an epoch's gone watches, by path.
type goneWatches struct {
	mu sync.Mutex
	m  map[string]*goneWatch
}

// WatchGone calls gone, once, on a goroutine the Session owns, when the node at
// p is deleted while this epoch's session lives, or when arming the watch finds
// it missing already. The watch is armed GoneArmDelay later, on a goroutine the
// Session owns, so WatchGone returns at once; it is armed again after a change of the node's
// data, and retried while the session is suspended. UnwatchGone(p) ends it: a
// deletion seen after UnwatchGone calls nothing, so an owner that deletes its
// own node calls UnwatchGone first. A second WatchGone of p replaces the first.
// Nothing is called after the session is lost (its ephemeral nodes went with
// it: the owner learns that from Lost).
func (ep *Epoch) WatchGone(p string, gone func()) {
	w := &goneWatch{gone: gone}
	ep.gone.mu.Lock()
	if ep.gone.m == nil {
		ep.gone.m = map[string]*goneWatch{}
	}
	if old := ep.gone.m[p]; old != nil {
		old.arm.Stop()
	}
	ep.gone.m[p] = w
	w.arm = time.AfterFunc(GoneArmDelay, func() {
		if ep.watching(p, w) && !ep.IsLost() {
			ep.s.Go(func() { ep.armGone(p, w) })
		}
	})
	ep.gone.mu.Unlock()
}

// UnwatchGone ends the gone watch of p, if any. (A data watch already left in
// ZooKeeper fires once more, at the node's deletion, and is ignored.)
func (ep *Epoch) UnwatchGone(p string) {
	ep.gone.mu.Lock()
	if w := ep.gone.m[p]; w != nil {
		w.arm.Stop()
		delete(ep.gone.m, p)
	}
	ep.gone.mu.Unlock()
}

// watching tells whether w is still p's gone watch.
func (ep *Epoch) watching(p string, w *goneWatch) bool {
	ep.gone.mu.Lock()
	defer ep.gone.mu.Unlock()
	return ep.gone.m[p] == w
}

// fireGone calls w's gone once, if w is still p's watch.
func (ep *Epoch) fireGone(p string, w *goneWatch) {
	ep.gone.mu.Lock()
	if ep.gone.m[p] != w {
		ep.gone.mu.Unlock()
		return
	}
	delete(ep.gone.m, p)
	ep.gone.mu.Unlock()
	if !ep.IsLost() {
		w.gone()
	}
}

// armGone sets the data watch on p: it returns once the watch is set, the node
// is found missing (gone is called), the watch was ended, or the session is
// lost. While the session is suspended it tries again, a little later each
// time. It runs in a background slot: a burst of grants arms its watches a few
// at a time on the connection, behind the clients' own calls.
func (ep *Epoch) armGone(p string, w *goneWatch) {
	wait := 50 * time.Millisecond
	for ep.watching(p, w) && !ep.IsLost() {
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
			ep.fireGone(p, w)
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
	w := ep.gone.m[ev.Path]
	ep.gone.mu.Unlock()
	if w == nil {
		return
	}
	switch ev.Type {
	case zk.EventNodeDeleted:
		ep.s.Go(func() { ep.fireGone(ev.Path, w) })
	case zk.EventNodeDataChanged:
		// The watch fired on a change of data: the node lives; watch it again.
		ep.s.Go(func() { ep.armGone(ev.Path, w) })
	}
}
