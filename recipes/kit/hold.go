package kit

import (
	"context"
	"fmt"
	"sort"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Hold names one thing a lease holds, e.g. {Kind: "lock", Name: "db-migrate"}.
type Hold struct {
	Kind string
	Name string
}

// Holding is what a lease holds: a lock grant, a candidacy, a participant, a
// member, a raised barrier. Release lets it go in ZooKeeper; it is called once,
// by the lease's end or by Release, with a context that bounds it: when ctx
// ends during a suspension, what is left to delete is deleted in the
// background once the session is back (zookeeper.Epoch.Settle, DeleteProtected),
// or goes with the session if it is lost.
type Holding interface {
	Release(ctx context.Context) error
}

// held is one entry of a lease's holds: a holding, or a reservation (pending)
// while it is being acquired.
type held struct {
	v       Holding
	pending bool
	// settled closes once a pending acquisition has granted or unwound (its
	// nodes are gone or the lease's). Both fields are under the lease's mu:
	// the channel is made only for an ending lease that waits on the
	// acquisition (settledChan), so an acquisition nobody waits on makes none.
	settled   chan struct{}
	isSettled bool
	// lease holds v as h: the entry is v's nodes' Gone (NodeGone), no
	// closure made per watch.
	lease *Lease
	h     Hold
}

// newPending is the reservation of an acquisition of h by l under way.
func newPending(l *Lease, h Hold) *held { return &held{pending: true, lease: l, h: h} }

// NodeGone ends the hold as lost when one of its nodes was deleted by
// another hand (its gone watch: Lease.watchNodes).
func (h *held) NodeGone(p string) {
	h.lease.lose(h.h, h.v, "its node "+p+" was deleted by another hand than this lease's release")
}

// settle marks the acquisition settled, closing settled if anybody waits on
// it; under the lease's mu.
func (h *held) settle() {
	if h.isSettled {
		return
	}
	h.isSettled = true
	if h.settled != nil {
		close(h.settled)
	}
}

// settledChan is closed once the acquisition has settled; under the lease's mu.
func (h *held) settledChan() chan struct{} {
	if h.isSettled {
		return closedChan
	}
	if h.settled == nil {
		h.settled = make(chan struct{})
	}
	return h.settled
}

// Acquire is the hold protocol every recipe shares:
//
//  1. reserve h on the lease: when the lease holds h already, that holding is
//     returned as it is (found is true; it is of type T, since a kind belongs to
//     one recipe); when h is being acquired by the lease already, ErrBusy; when
//     the lease ended, ErrLeaseEnded;
//  2. pin an implicit lease while acquire runs (its TTL counts from the answer,
//     not from the start of a long wait);
//  3. check that the lease's session is the connected one (waiting through a
//     suspension as ctx allows: zookeeper.WithSuspendWait), then run acquire
//     under it;
//  4. grant: the holding becomes the lease's, released when the lease ends;
//  5. unwind: when acquire fails, the reservation is dropped and an implicit
//     lease ends; when the lease ended while acquire ran, the holding is
//     released at once and ErrLeaseEnded returned.
func Acquire[T Holding](ctx context.Context, l *Lease, h Hold, acquire func(ctx context.Context, ep *zookeeper.Epoch) (T, error)) (v T, found bool, err error) {
	existing, pending, err := l.reserve(h)
	if err != nil || existing != nil {
		v, _ = existing.(T)
		return v, existing != nil, err
	}
	if l.Implicit {
		l.pin()
		defer l.unpin()
	}
	if err := l.AwaitConnected(ctx); err != nil {
		l.unreserve(h, pending)
		return v, false, fmt.Errorf("%s %q: %w", h.Kind, h.Name, err)
	}
	v, err = acquire(ctx, l.ep)
	if err != nil {
		l.unreserve(h, pending)
		return v, false, err
	}
	if err := l.grant(h, v, pending); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), l.mgr.s.OpTimeout())
		_ = v.Release(cctx)
		cancel()
		l.unreserve(h, pending)
		var zero T
		return zero, false, err
	}
	l.mgr.holdChanged(l.ID, h)
	l.watchNodes(pending)
	return v, false, nil
}

// Release takes h from the lease and releases it; an implicit lease ends with it.
// ErrNotHeld when the lease does not hold h.
func Release(ctx context.Context, l *Lease, h Hold) error {
	v, err := l.take(h, nil)
	if err != nil {
		return err
	}
	err = v.Release(ctx)
	l.released()
	return err
}

// Take takes h from the lease without releasing it: the caller releases it (and
// may acquire h again for the same lease, as a requeue does). ErrNotHeld when the
// lease does not hold h as a T: the lease then keeps what it holds.
func Take[T Holding](l *Lease, h Hold) (T, error) {
	v, err := l.take(h, func(v Holding) bool { _, ok := v.(T); return ok })
	t, _ := v.(T)
	return t, err
}

// Lookup returns the lease's holding of h when it holds it.
func Lookup[T Holding](l *Lease, h Hold) (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.holds.get(h)
	if !ok || e.pending {
		var zero T
		return zero, false
	}
	t, ok := e.v.(T)
	return t, ok
}

// Released ends an implicit lease after the one thing it held was let go (see
// Take).
func (l *Lease) Released() { l.released() }

// reserve marks h as being acquired and returns the reservation, or the
// existing holding of h, or ErrBusy when h is being acquired already, or
// ErrLeaseEnded when the lease ended.
func (l *Lease) reserve(h Hold) (existing Holding, pending *held, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, nil, fmt.Errorf("lease %q: %w", l.ID, ErrLeaseEnded)
	}
	if e, found := l.holds.get(h); found {
		if e.pending {
			return nil, nil, fmt.Errorf("%s %q: %w", h.Kind, h.Name, ErrBusy)
		}
		return e.v, nil, nil
	}
	pending = newPending(l, h)
	l.holds.set(h, pending)
	return nil, pending, nil
}

// grant turns h's reservation into a holding. It fails with ErrLeaseEnded when
// the lease ended meanwhile, and with ErrUnavailable when the lease's session is
// in doubt (a suspension that lasted until it could have expired: what it holds
// is being reported lost, and a grant made now could not be vouched for). The
// check is made under the lease's lock, which loseAll takes after the doubt is
// declared: a grant either sees the doubt or is lost with the rest.
func (l *Lease) grant(h Hold, v Holding, pending *held) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return fmt.Errorf("lease %q: %w", l.ID, ErrLeaseEnded)
	}
	if l.ep.IsLost() {
		return fmt.Errorf("%s %q: %w", h.Kind, h.Name, ErrSessionLost)
	}
	if !l.ep.Connected() && l.mgr.s.InDoubt() {
		return fmt.Errorf("%s %q: the session could have expired meanwhile: %w", h.Kind, h.Name, ErrUnavailable)
	}
	// The reservation becomes the holding: no second entry.
	pending.v, pending.pending = v, false
	pending.settle()
	return nil
}

// unreserve drops a reservation that was not granted (its nodes are gone by
// now); an implicit lease ends.
func (l *Lease) unreserve(h Hold, pending *held) {
	l.mu.Lock()
	if e, ok := l.holds.get(h); ok && e == pending {
		l.holds.del(h)
	}
	pending.settle()
	l.mu.Unlock()
	l.EndImplicit()
}

// take removes h from the lease's holds and returns it, or ErrNotHeld (also
// when is, if not nil, rejects the holding: it is checked before anything is
// removed). Its nodes are no longer watched: whoever took it lets them go.
func (l *Lease) take(h Hold, is func(Holding) bool) (Holding, error) {
	l.mu.Lock()
	e, ok := l.holds.get(h)
	if !ok || e.pending || (is != nil && !is(e.v)) {
		l.mu.Unlock()
		return nil, fmt.Errorf("%s %q: %w", h.Kind, h.Name, ErrNotHeld)
	}
	l.holds.del(h)
	l.mu.Unlock()
	l.mgr.holdChanged(l.ID, h)
	l.unwatchNodes(e.v)
	return e.v, nil
}

// released ends an implicit lease after its one hold was released.
func (l *Lease) released() { l.EndImplicit() }

// holdChanged tells the OnChange function, if any, that hold h of lease id
// changed.
func (m *Leases) holdChanged(id string, h Hold) {
	if f := m.onChange.Load(); f != nil {
		(*f)(Change{Lease: id, Hold: h})
	}
}

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
	// The slice may be the holding's own: callers read it, never change it.
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

// watchNodes starts watching the nodes of e's holding (granted: e.v is set
// for good), if it names any; their deletion is e's NodeGone.
func (l *Lease) watchNodes(e *held) {
	nh, ok := e.v.(NodeHolding)
	if !ok {
		return
	}
	for _, p := range nh.HeldNodes() {
		l.ep.WatchGone(p, e)
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
	e, ok := l.holds.get(h)
	if l.err != nil || !ok || e.pending || e.v != v {
		l.mu.Unlock()
		return
	}
	l.holds.del(h)
	l.lost.list = append(l.lost.list, LostHold{Hold: h, Reason: reason})
	if l.lost.next != nil {
		close(l.lost.next)
		l.lost.next = nil
	}
	l.mu.Unlock()
	l.mgr.holdChanged(l.ID, h)
	l.unwatchNodes(v)
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
	for h, e := range l.holds.all() {
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
		l.holds.del(e.h)
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
		m.holdChanged(l.ID, e.h)
		l.unwatchNodes(e.v)
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
