package kit

import (
	"context"
	"fmt"
	"sort"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Lost holds: a hold whose node is deleted by another hand than the lease's own
// release (an operator, a client with rights on the parent, a bug) has ended, as
// ZooKeeper's recipes say: whoever holds the lock next holds it with a higher
// fencing token, and this lease must stop acting as its holder. The lease
// watches the nodes of every holding that names them (NodeHolding), with one
// ZooKeeper watch per node, and ends the hold when one goes.

// NodeHolding is a Holding that lives in ZooKeeper nodes of the lease's session:
// when any of them is deleted by another hand than Release, the hold is lost.
type NodeHolding interface {
	Holding
	// HeldNodes are the paths of the nodes; they do not change while held.
	HeldNodes() []string
}

// LostHold is a hold that ended without its release.
type LostHold struct {
	Hold
	// Reason says why, for people.
	Reason string
}

// lostHolds are the holds a lease lost, in order, and a channel closed at the
// next loss.
type lostHolds struct {
	list []LostHold
	next chan struct{}
}

// LostHolds returns the holds the lease lost after the first after of them, and
// a channel that is closed at its next loss.
func (l *Lease) LostHolds(after int) ([]LostHold, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lost.next == nil {
		l.lost.next = make(chan struct{})
	}
	var out []LostHold
	if after < len(l.lost.list) {
		out = append(out, l.lost.list[after:]...)
	}
	return out, l.lost.next
}

// watchNodes starts watching v's nodes, if it names any.
func (l *Lease) watchNodes(h Hold, v Holding) {
	nh, ok := v.(NodeHolding)
	if !ok {
		return
	}
	for _, p := range nh.HeldNodes() {
		l.ep.WatchGone(p, func() { l.lose(h, v, "its node "+p+" was deleted by another hand than this lease's release") })
	}
}

// unwatchNodes stops watching v's nodes: the lease lets v go itself.
func (l *Lease) unwatchNodes(v Holding) {
	if nh, ok := v.(NodeHolding); ok {
		for _, p := range nh.HeldNodes() {
			l.ep.UnwatchGone(p)
		}
	}
}

// Lose ends the lease's hold h, held as v, as lost for reason, when a recipe
// learns itself that its node is gone (a key deleted through the API by
// another client, a write that found the node missing): as when the watch sees
// it, the lease's stream is told. It does nothing when the lease does not hold
// h as v any more.
func Lose(l *Lease, h Hold, v Holding, reason string) { l.lose(h, v, reason) }

// lose ends the hold h, if the lease still holds it as v: it is taken off the
// lease at once, the loss is recorded for the lease's stream and counted, and v
// is released (its other nodes deleted, its local state let go). An implicit
// lease ends with it.
func (l *Lease) lose(h Hold, v Holding, reason string) {
	l.mu.Lock()
	e, ok := l.holds[h]
	if l.err != nil || !ok || e.pending || e.v != v {
		l.mu.Unlock()
		return
	}
	delete(l.holds, h)
	l.lost.list = append(l.lost.list, LostHold{Hold: h, Reason: reason})
	if l.lost.next != nil {
		close(l.lost.next)
		l.lost.next = nil
	}
	l.mu.Unlock()
	l.unwatchNodes(v)
	l.mgr.holdChanged(l.ID, h)
	l.mgr.metrics.holdsLost.WithLabelValues(h.Kind).Inc()
	l.mgr.s.Logger().Warn("hold lost", "lease", l.ID, "kind", h.Kind, "name", h.Name, "why", reason)
	ctx, cancel := context.WithTimeout(context.Background(), l.mgr.s.OpTimeout())
	_ = v.Release(ctx)
	cancel()
	l.released()
}

// doubtReason is why the holds of ep's leases are lost at a doubt of its
// session.
func doubtReason(ep *zookeeper.Epoch) string {
	return fmt.Sprintf("no answer from ZooKeeper for 2/3 of the session timeout (%s) while suspended: the session could have expired",
		ep.SessionTimeout())
}

// loseAll ends every hold of the lease as lost for reason (a doubt of its
// session: see Leases.watchEpoch), as lose ends one: each is taken off the
// lease at once, recorded for the lease's stream and counted, and released
// in the background, on goroutines the registry waits for (Wait). A release
// under a suspended session deletes the hold's nodes as soon as the same
// session is connected again (zookeeper.Epoch.Settle), so that others need not
// wait for the session's expiry; if the session is lost instead, its nodes went
// with it. The lease itself lives on (an implicit lease ends with its hold).
// Acquisitions under way are not holds yet: they go on, and their grant
// checks the doubt (grant).
func (l *Lease) loseAll(reason string) {
	type entry struct {
		h Hold
		v Holding
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	var lost []entry
	for h, e := range l.holds {
		if !e.pending {
			lost = append(lost, entry{h, e.v})
		}
	}
	sort.Slice(lost, func(i, j int) bool {
		if lost[i].h.Kind != lost[j].h.Kind {
			return lost[i].h.Kind < lost[j].h.Kind
		}
		return lost[i].h.Name < lost[j].h.Name
	})
	for _, e := range lost {
		delete(l.holds, e.h)
		l.lost.list = append(l.lost.list, LostHold{Hold: e.h, Reason: reason})
	}
	if len(lost) > 0 && l.lost.next != nil {
		close(l.lost.next)
		l.lost.next = nil
	}
	l.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	m := l.mgr
	for _, e := range lost {
		l.unwatchNodes(e.v)
		m.holdChanged(l.ID, e.h)
		m.metrics.holdsLost.WithLabelValues(e.h.Kind).Inc()
		m.s.Logger().Warn("hold lost", "lease", l.ID, "kind", e.h.Kind, "name", e.h.Name, "why", reason)
		m.watchers.Add(1)
		go func() {
			defer m.watchers.Done()
			ctx, cancel := context.WithTimeout(context.Background(), m.s.OpTimeout())
			defer cancel()
			_ = e.v.Release(ctx)
		}()
	}
	l.released()
}
