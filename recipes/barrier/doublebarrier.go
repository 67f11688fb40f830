package barrier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Double barriers: the enter/leave protocol of the ZooKeeper recipes page.
//
// Layout under the container <root>/double-barriers/<name>:
//
//	p-<id>  one ephemeral node per participant, of the sidecar's session, holding
//	        "<count>\n<lease id>"; the lease that enrolled it holds it.
//	ready   a persistent node made by whoever sees at least `count` participants;
//	        its data is that count.
//
// Enter creates p-<id>, then watches "ready" and counts the participants; the one
// that sees enough makes "ready", which wakes every waiter. Leave deletes p-<id>
// and waits until no participant is left, watching the lowest remaining one (as
// the recipe's non-lowest participants do); the last participant to go deletes
// "ready" so the barrier can be used again.
//
// "ready" left over from an earlier round (its last participant died before
// deleting it) is recognised: a "ready" is current only if some present
// participant is older than it (smaller czxid). A stale one is deleted and the
// round starts afresh. Participants whose lease ends drop out (their node is
// deleted), so they block neither the count (if they leave after "ready") nor the
// leaving of the others.

// DoubleBarrierKind is the kind of a double-barrier participant among its
// lease's holds (kit.Hold); the hold's name is <barrier>/<id>.
const DoubleBarrierKind = "double-barrier"

const dblKind = DoubleBarrierKind

// dblParticipant is one double-barrier participant enrolled by this sidecar: the
// lease's holding.
type dblParticipant struct {
	b     *Barriers
	key   string // name/id
	name  string
	node  string
	czxid int64
	count int
	lease *kit.Lease
	ep    *zookeeper.Epoch
}

// DoubleBarrierEntered is the outcome of a successful Enter.
type DoubleBarrierEntered struct {
	// Lease is the lease that holds the participant: always the lease Enter was
	// given (a participant enrolled by another lease is never handed over).
	Lease string
}

// DoubleBarrierState is what anyone can see of a double barrier.
type DoubleBarrierState struct {
	Name string
	// Count is the count "ready" was made for; before that, the count of the
	// oldest present participant, the barrier's (0 when there is none).
	Count        int
	Ready        bool
	Participants []string // ids, sorted
}

func (b *Barriers) dblParent(name string) string { return b.dblDir + "/" + name }

const (
	readyNode       = "ready"
	participantPref = "p-"
	maxCount        = 100000
)

func checkParticipant(name, id string, count int) error {
	if err := kit.CheckName("double barrier", name); err != nil {
		return err
	}
	if err := kit.CheckName("participant", id); err != nil {
		return err
	}
	if count < 1 || count > maxCount {
		return fmt.Errorf("count %d: must be between 1 and %d: %w", count, maxCount, kit.ErrInvalidArgument)
	}
	return nil
}

// Enter enrols participant id in the double barrier for a lease and returns once at
// least count participants have entered. When wait (0: look once) ends first it
// returns a BarrierNotReadyError and the participant stays enrolled; entering
// again with the same lease goes on waiting. While a request waits, an implicit
// lease cannot expire: its TTL counts from the end of the request. When ctx ends
// (the client went away) an enrolment made by this call is withdrawn. An id
// enrolled by another lease or another client is ErrParticipantExists (the other
// lease is never handed over, nor named). A count other than the barrier's (the
// count of the oldest present participant) is a CountMismatchError. The lease
// is src's, asked for once the names and count are checked (a call refused for
// them asks for none); on every later failure but BarrierNotReadyError an
// implicit lease ends.
func (b *Barriers) Enter(ctx context.Context, src kit.LeaseSource, name, id string, count int, wait time.Duration) (_ *DoubleBarrierEntered, err error) {
	if err := checkParticipant(name, id, count); err != nil {
		return nil, err
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	defer func() { b.metrics.observe("enter", start, err) }()
	key := name + "/" + id
	b.mu.Lock()
	prev := b.enrolled[key]
	b.mu.Unlock()
	if prev != nil && prev.lease != lease && prev.lease.Err() == nil {
		if len(lease.Holds()) == 0 {
			lease.EndImplicit()
		}
		return nil, fmt.Errorf("participant %q of %q is enrolled by another lease: %w", id, name, ErrParticipantExists)
	}
	h := kit.Hold{Kind: dblKind, Name: key}
	p, found, err := kit.Acquire(ctx, lease, h, func(ctx context.Context, ep *zookeeper.Epoch) (*dblParticipant, error) {
		return b.enrol(ctx, ep, lease, key, name, id, count)
	})
	if err != nil {
		return nil, err
	}
	if found && p.count != count {
		return nil, &CountMismatchError{Name: name, Count: p.count}
	}
	unpin := func() {}
	if lease.Implicit {
		unpin = lease.Pin() // its TTL counts from the end of the request
	}
	err = b.awaitReady(ctx, lease, p, count, wait)
	unpin()
	if err == nil {
		return &DoubleBarrierEntered{Lease: lease.ID}, nil
	}
	if !found && ctx.Err() != nil {
		// The client went away: leave nothing behind.
		cctx, cancel := context.WithTimeout(context.Background(), b.s.OpTimeout())
		_ = kit.Release(cctx, lease, h)
		cancel()
	}
	return nil, err
}

// enrol creates the participant node under ep's session, and checks its count
// against the barrier's: before the create (precheckCount), so that a count
// refused outright writes nothing, and after it (checkCount), for the races.
func (b *Barriers) enrol(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, key, name, id string, count int) (*dblParticipant, error) {
	parent := b.dblParent(name)
	node := parent + "/" + participantPref + id
	if err := b.precheckCount(ctx, ep, parent, participantPref+id, name, count); err != nil {
		return nil, err
	}
	data := []byte(strconv.Itoa(count) + "\n" + lease.ID)
	st, err := ep.CreateOwned(ctx, node, data, true)
	if st == nil && err == nil {
		_, st, err = ep.Exists(ctx, node)
		if err == nil && st == nil {
			err = fmt.Errorf("participant node %s vanished: %w", node, kit.ErrSessionLost)
		}
	}
	switch {
	case errors.Is(err, zookeeper.ErrNodeExists):
		return nil, fmt.Errorf("participant %q of %q: %w", id, name, ErrParticipantExists)
	case err != nil:
		return nil, fmt.Errorf("enter double barrier %q: %w", name, err)
	}
	if err := b.checkCount(ctx, ep, parent, node, st.Czxid, name, count, lease.ID); err != nil {
		return nil, err
	}
	p := &dblParticipant{b: b, key: key, name: name, node: node, czxid: st.Czxid, count: count, lease: lease, ep: ep}
	b.mu.Lock()
	b.enrolled[key] = p
	b.mu.Unlock()
	b.metrics.participants.Inc()
	return p, nil
}

// AdoptParticipant makes the participant h of lease the lease's again after a
// restart (a kit.Adopter): its one saved node is p-<id>, still an ephemeral
// node of the lease's (resumed) session carrying "<count>\n<lease id>". The
// node is kept as it is, so the barrier's participants, count and readiness do
// not change; the participant is enrolled here again (Enter with the lease goes
// on waiting, Leave withdraws it).
func (b *Barriers) AdoptParticipant(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	name, id, _ := strings.Cut(h.Name, "/")
	if err := checkParticipant(name, id, 1); err != nil {
		return nil, fmt.Errorf("participant %q: %w", h.Name, err)
	}
	node := b.dblParent(name) + "/" + participantPref + id
	if len(h.Nodes) != 1 || h.Nodes[0] != node {
		return nil, fmt.Errorf("participant %q of %q: saved nodes %v are not its node %s", id, name, h.Nodes, node)
	}
	data, st, err := kit.OwnedNode(ctx, lease, node)
	if err != nil {
		return nil, fmt.Errorf("participant %q of %q: %w", id, name, err)
	}
	first, leaseID, _ := strings.Cut(string(data), "\n")
	count, err := strconv.Atoi(first)
	if err != nil || leaseID != lease.ID {
		return nil, fmt.Errorf("participant %q of %q: node %s carries %q, not a count and lease %s", id, name, node, data, lease.ID)
	}
	p := &dblParticipant{b: b, key: h.Name, name: name, node: node, czxid: st.Czxid, count: count, lease: lease, ep: lease.Epoch()}
	b.mu.Lock()
	b.enrolled[h.Name] = p
	b.mu.Unlock()
	b.metrics.participants.Inc()
	return p, nil
}

// HeldNodes is the participant's node: deleted by another hand, the entry is
// lost.
func (p *dblParticipant) HeldNodes() []string { return []string{p.node} }

// Release withdraws the participant: its node is deleted (and "ready" with the
// last one), retried through a suspension while the session lives.
func (p *dblParticipant) Release(ctx context.Context) error {
	b := p.b
	b.mu.Lock()
	if b.enrolled[p.key] == p {
		delete(b.enrolled, p.key)
	}
	b.mu.Unlock()
	b.metrics.participants.Dec()
	parent := b.dblParent(p.name)
	return p.ep.Settle(ctx, func(ctx context.Context) error {
		return b.dropParticipant(ctx, p.ep, parent, p.node, p.lease.ID)
	})
}

// checkCount compares count with the barrier's: the count of the oldest present
// participant (smallest czxid; ours when none is older). On a mismatch it deletes
// our node (made at czxid) and returns a CountMismatchError. Every participant
// compares itself with the same oldest one, so all that pass agree on the count
// until the barrier empties.
func (b *Barriers) checkCount(ctx context.Context, ep *zookeeper.Epoch, parent, node string, czxid int64, name string, count int, leaseID string) error {
	children, _, err := ep.Children(ctx, parent)
	if err != nil {
		return b.undoEnrol(ep, parent, node, leaseID, fmt.Errorf("enter double barrier %q: %w", name, err))
	}
	self := node[len(parent)+1:]
	others := slices.DeleteFunc(participants(children), func(s string) bool { return s == self })
	counts, czxids, err := b.participantCounts(ctx, ep, parent, others)
	if err != nil {
		return b.undoEnrol(ep, parent, node, leaseID, fmt.Errorf("enter double barrier %q: %w", name, err))
	}
	want := count
	if c, z := oldestCount(counts, czxids); z > 0 && z < czxid {
		want = c
	}
	if want != count {
		return b.undoEnrol(ep, parent, node, leaseID, &CountMismatchError{Name: name, Count: want})
	}
	return nil
}

// precheckCount refuses count, before anything is written, when the oldest
// present participant (self, the node about to be made, left out) carries
// another one. Participants that enter together pass it; checkCount, after the
// create, settles them.
func (b *Barriers) precheckCount(ctx context.Context, ep *zookeeper.Epoch, parent, self, name string, count int) error {
	children, _, err := ep.Children(ctx, parent)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("enter double barrier %q: %w", name, err)
	}
	others := slices.DeleteFunc(participants(children), func(s string) bool { return s == self })
	counts, czxids, err := b.participantCounts(ctx, ep, parent, others)
	if err != nil {
		return fmt.Errorf("enter double barrier %q: %w", name, err)
	}
	if want, z := oldestCount(counts, czxids); z > 0 && want != count {
		return &CountMismatchError{Name: name, Count: want}
	}
	return nil
}

// oldestCount returns the count and czxid of the oldest participant that
// carries a count (0, 0 when none does), from participantCounts' answer.
func oldestCount(counts []int, czxids []int64) (count int, czxid int64) {
	for i, c := range counts {
		if c > 0 && czxids[i] > 0 && (czxid == 0 || czxids[i] < czxid) {
			count, czxid = c, czxids[i]
		}
	}
	return count, czxid
}

// undoEnrol deletes a participant node that was not granted, with a fresh bounded
// context, and returns err.
func (b *Barriers) undoEnrol(ep *zookeeper.Epoch, parent, node, leaseID string, err error) error {
	cctx, cancel := context.WithTimeout(context.Background(), b.s.OpTimeout())
	defer cancel()
	_ = ep.Settle(cctx, func(ctx context.Context) error { return b.dropParticipant(ctx, ep, parent, node, leaseID) })
	return err
}

// participantCounts reads the count and czxid of each participant node (0, 0 for
// one that is gone or carries no count).
func (b *Barriers) participantCounts(ctx context.Context, ep *zookeeper.Epoch, parent string, parts []string) (counts []int, czxids []int64, err error) {
	counts, czxids = make([]int, len(parts)), make([]int64, len(parts))
	nodes, err := ep.GetEach(ctx, parent, parts)
	if err != nil {
		return nil, nil, err
	}
	for i, n := range nodes {
		if n.Stat == nil {
			continue // gone
		}
		first, _, _ := strings.Cut(string(n.Data), "\n")
		counts[i], _ = strconv.Atoi(first)
		czxids[i] = n.Stat.Czxid
	}
	return counts, czxids, nil
}

// dropParticipant deletes a participant node made for leaseID, then deletes
// "ready" when no participant is left.
func (b *Barriers) dropParticipant(ctx context.Context, ep *zookeeper.Epoch, parent, node, leaseID string) error {
	data, st, err := ep.Get(ctx, node)
	switch {
	case errors.Is(err, zookeeper.ErrNoNode):
	case err != nil:
		return err
	case st.EphemeralOwner == ep.ID() && strings.HasSuffix(string(data), "\n"+leaseID):
		err = ep.Delete(ctx, node, st.Version)
		if err != nil && !errors.Is(err, zookeeper.ErrNoNode) && !errors.Is(err, zookeeper.ErrBadVersion) {
			return err
		}
	}
	return b.clearReadyIfEmpty(ctx, ep, parent)
}

// clearReadyIfEmpty deletes "ready" when no participant is left. Should a new
// round make "ready" just between the listing and the delete, its waiters see it
// go and make it again.
func (b *Barriers) clearReadyIfEmpty(ctx context.Context, ep *zookeeper.Epoch, parent string) error {
	children, _, err := ep.Children(ctx, parent)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(participants(children)) > 0 || !slices.Contains(children, readyNode) {
		return nil
	}
	if err := ep.Delete(ctx, parent+"/"+readyNode, -1); err != nil && !errors.Is(err, zookeeper.ErrNoNode) {
		return err
	}
	return nil
}

// participants keeps the participant nodes of a listing, sorted.
func participants(children []string) []string {
	var out []string
	for _, c := range children {
		if strings.HasPrefix(c, participantPref) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// readyLook is one look at a double barrier from a participant's side.
type readyLook struct {
	ready   bool
	readySt *zookeeper.Stat
	watch   <-chan zookeeper.Event
	parts   []string
}

// look watches "ready" and lists the participants, in one round trip.
func (b *Barriers) look(ctx context.Context, ep *zookeeper.Epoch, parent string) (readyLook, error) {
	var l readyLook
	var children []string
	err := zookeeper.Parallel(
		func() error {
			var err error
			l.ready, l.readySt, l.watch, err = ep.ExistsW(ctx, parent+"/"+readyNode)
			return err
		},
		func() error {
			var err error
			children, _, err = ep.Children(ctx, parent)
			return err
		})
	if errors.Is(err, zookeeper.ErrNoNode) {
		err = nil // the container went with its last child: ours too
	}
	l.parts = participants(children)
	return l, err
}

// awaitReady waits until "ready" is current for p.
func (b *Barriers) awaitReady(ctx context.Context, lease *kit.Lease, p *dblParticipant, count int, wait time.Duration) error {
	d := kit.NewDeadline(wait)
	defer d.Stop()
	ep := p.ep
	parent := b.dblParent(p.name)
	self := p.node[len(parent)+1:]
	for {
		l, err := b.look(ctx, ep, parent)
		if err != nil {
			if errors.Is(err, kit.ErrUnavailable) && ctx.Err() == nil && !d.Expired() {
				if werr := ep.WaitConnected(ctx); werr != nil {
					return werr
				}
				continue
			}
			return err
		}
		if !slices.Contains(l.parts, self) {
			if lease.Err() != nil {
				return fmt.Errorf("lease %q: %w", lease.ID, kit.ErrLeaseEnded)
			}
			return fmt.Errorf("participant node %s vanished: %w", p.node, kit.ErrSessionLost)
		}
		done, again, err := b.step(ctx, ep, parent, self, p, l, count)
		if done || err != nil {
			return err
		}
		if again {
			continue
		}
		if err := b.sleepOn(ctx, lease, p, l, count, d); err != nil {
			return err
		}
	}
}

// step acts on one look: done when "ready" is current; a stale "ready" is
// deleted, a missing one made when at least count participants carry count
// (again: look once more; neither: wait for "ready").
func (b *Barriers) step(ctx context.Context, ep *zookeeper.Epoch, parent, self string, p *dblParticipant, l readyLook, count int) (done, again bool, err error) {
	readyPath := parent + "/" + readyNode
	switch {
	case l.ready:
		current, err := b.readyIsCurrent(ctx, ep, parent, self, p.czxid, l.readySt.Czxid, l.parts)
		if err != nil || current {
			return current, !current, nil // an error is retried by the next look
		}
		// Left over from an earlier round: delete it and count afresh.
		err = ep.Delete(ctx, readyPath, l.readySt.Version)
		if err != nil && !errors.Is(err, zookeeper.ErrNoNode) && !errors.Is(err, zookeeper.ErrBadVersion) {
			return false, false, err
		}
		return false, true, nil
	case len(l.parts) >= count:
		enough, err := b.enoughWithCount(ctx, ep, parent, l.parts, count)
		if err == nil && !enough {
			return false, false, nil // a refused participant not deleted yet: wait
		}
		if err == nil {
			_, err = ep.Create(ctx, readyPath, []byte(strconv.Itoa(count)), zookeeper.Persistent)
		}
		if err != nil && !errors.Is(err, zookeeper.ErrNodeExists) && !errors.Is(err, kit.ErrUnavailable) {
			return false, false, err
		}
		return false, true, nil // unavailable: retried by the next look
	}
	return false, false, nil
}

// enoughWithCount reports whether at least count of parts entered with count: a
// participant with another count (refused, but not yet deleted) never makes a
// barrier ready.
func (b *Barriers) enoughWithCount(ctx context.Context, ep *zookeeper.Epoch, parent string, parts []string, count int) (bool, error) {
	counts, _, err := b.participantCounts(ctx, ep, parent, parts)
	if err != nil {
		return false, err
	}
	n := 0
	for _, c := range counts {
		if c == count {
			n++
		}
	}
	return n >= count, nil
}

// sleepOn waits for the "ready" watch of l, or an end of the wait.
func (b *Barriers) sleepOn(ctx context.Context, lease *kit.Lease, p *dblParticipant, l readyLook, count int, d *kit.Deadline) error {
	notReady := &BarrierNotReadyError{Name: p.name, Count: count, Participants: len(l.parts), Lease: lease.ID}
	if d.Expired() {
		return notReady
	}
	select {
	case <-l.watch:
		return nil
	case <-d.C:
		return notReady
	case <-ctx.Done():
		return ctx.Err()
	case <-lease.Ending():
		return fmt.Errorf("lease %q: %w", lease.ID, kit.ErrLeaseEnded)
	case <-p.ep.Lost():
		return kit.ErrSessionLost
	}
}

// readyIsCurrent reports whether the "ready" made at readyCzxid belongs to the
// present round: made after our own node, or after some present participant.
func (b *Barriers) readyIsCurrent(ctx context.Context, ep *zookeeper.Epoch, parent, self string, selfCzxid, readyCzxid int64, parts []string) (bool, error) {
	if selfCzxid < readyCzxid {
		return true, nil
	}
	others := slices.DeleteFunc(slices.Clone(parts), func(s string) bool { return s == self })
	if len(others) == 0 {
		return false, nil
	}
	czxids := make([]int64, len(others))
	fns := make([]func() error, len(others))
	for i, o := range others {
		fns[i] = func() error {
			_, st, err := ep.Exists(ctx, parent+"/"+o)
			if err == nil && st != nil {
				czxids[i] = st.Czxid
			}
			return err
		}
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return false, err
	}
	for _, z := range czxids {
		if z > 0 && z < readyCzxid {
			return true, nil
		}
	}
	return false, nil
}

// Leave removes participant id from the double barrier and returns once every
// participant has left. The participant must be held by lease; a participant that
// is not enrolled any more (it left before, or its lease ended) only waits. When
// wait (0: look once) ends first it returns a BarrierNotEmptyError; the own entry
// is removed already. lease may be nil (an ended lease): then only waiting is
// possible.
func (b *Barriers) Leave(ctx context.Context, lease *kit.Lease, name, id string, wait time.Duration) (err error) {
	if err := kit.CheckName("double barrier", name); err != nil {
		return err
	}
	if err := kit.CheckName("participant", id); err != nil {
		return err
	}
	start := time.Now()
	defer func() { b.metrics.observe("leave", start, err) }()
	ep, err := b.s.Await(ctx)
	if err != nil {
		return err
	}
	h := kit.Hold{Kind: dblKind, Name: name + "/" + id}
	var p *dblParticipant
	if lease != nil {
		p, _ = kit.Take[*dblParticipant](lease, h)
	}
	if p != nil {
		err := p.Release(ctx)
		lease.Released()
		if err != nil {
			return err
		}
	} else if err := b.checkNotEnrolled(ctx, ep, lease, name, id); err != nil {
		return err
	}
	return b.awaitEmpty(ctx, name, wait)
}

// checkNotEnrolled refuses a leave of a participant that is there but not held by
// lease.
func (b *Barriers) checkNotEnrolled(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, name, id string) error {
	exists, _, err := ep.Exists(ctx, b.dblParent(name)+"/"+participantPref+id)
	switch {
	case err != nil:
		return err
	case !exists:
		return nil
	case lease == nil:
		return fmt.Errorf("participant %q of %q: %w", id, name, kit.ErrLeaseNotFound)
	default:
		return fmt.Errorf("participant %q of %q: %w", id, name, kit.ErrNotHeld)
	}
}

// awaitEmpty waits until no participant is left, watching the lowest remaining.
func (b *Barriers) awaitEmpty(ctx context.Context, name string, wait time.Duration) error {
	d := kit.NewDeadline(wait)
	defer d.Stop()
	parent := b.dblParent(name)
	for {
		changed := b.s.Changed()
		ep, err := b.s.Await(ctx)
		var children []string
		if err == nil {
			children, _, err = ep.Children(ctx, parent)
		}
		if errors.Is(err, zookeeper.ErrNoNode) {
			return nil
		}
		if err != nil {
			if kit.WaitOutSession(ctx, err, changed, d) {
				continue
			}
			return err
		}
		parts := participants(children)
		if len(parts) == 0 {
			return b.clearReadyIfEmpty(ctx, ep, parent)
		}
		gone, err := kit.AwaitGone(ctx, b.s, parent+"/"+parts[0], d)
		if err != nil {
			return err
		}
		if !gone {
			return &BarrierNotEmptyError{Name: name, Remaining: participantIDs(parts)}
		}
	}
}

func participantIDs(parts []string) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = strings.TrimPrefix(p, participantPref)
	}
	return out
}

// InspectDouble returns the double barrier's participants, readiness and count.
func (b *Barriers) InspectDouble(ctx context.Context, name string) (*DoubleBarrierState, error) {
	if err := kit.CheckName("double barrier", name); err != nil {
		return nil, err
	}
	ep, err := b.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	parent := b.dblParent(name)
	children, _, err := ep.Children(ctx, parent)
	st := &DoubleBarrierState{Name: name, Participants: []string{}}
	if errors.Is(err, zookeeper.ErrNoNode) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	parts := participants(children)
	st.Participants = participantIDs(parts)
	st.Ready = slices.Contains(children, readyNode)
	if st.Ready {
		data, _, err := ep.Get(ctx, parent+"/"+readyNode)
		if err != nil && !errors.Is(err, zookeeper.ErrNoNode) {
			return nil, err
		}
		st.Count, _ = strconv.Atoi(string(data))
		return st, nil
	}
	// Before "ready": the barrier's count is its oldest participant's.
	counts, czxids, err := b.participantCounts(ctx, ep, parent, parts)
	if err != nil {
		return nil, err
	}
	st.Count, _ = oldestCount(counts, czxids)
	return st, nil
}
