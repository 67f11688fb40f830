package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
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

const dblKind = "double-barrier"

// participant is one double-barrier participant enrolled by this sidecar.
type dblParticipant struct {
	key   string // name/id
	name  string
	node  string
	czxid int64
	count int
	lease *Lease
	ep    *epoch
}

// DoubleBarrierEntered is the outcome of a successful Enter.
type DoubleBarrierEntered struct {
	// Lease is the lease that holds the participant: always the lease Enter was
	// given (a participant enrolled by another lease is never handed over).
	Lease string
}

// ErrCountMismatch: a participant entered with a count other than the double
// barrier's; see CountMismatchError.
var ErrCountMismatch = errors.New("count mismatch")

// CountMismatchError is returned (it matches ErrCountMismatch) when a participant
// enters with a count other than the barrier's: the count of its oldest present
// participant (the first to enter, until the barrier empties). Nothing of the
// attempt is left behind.
type CountMismatchError struct {
	Name  string
	Count int // the barrier's count
}

func (e *CountMismatchError) Error() string {
	return fmt.Sprintf("double barrier %q counts %d participants", e.Name, e.Count)
}

// Unwrap makes errors.Is(err, ErrCountMismatch) hold.
func (e *CountMismatchError) Unwrap() error { return ErrCountMismatch }

// BarrierNotReadyError is returned (it matches ErrBarrierNotReady) when fewer than
// Count participants had entered when the wait ended. The participant stays
// enrolled, held by Lease.
type BarrierNotReadyError struct {
	Name         string
	Count        int
	Participants int
	Lease        string
}

func (e *BarrierNotReadyError) Error() string {
	return fmt.Sprintf("double barrier %q: %d of %d participants have entered", e.Name, e.Participants, e.Count)
}

// Unwrap makes errors.Is(err, ErrBarrierNotReady) hold.
func (e *BarrierNotReadyError) Unwrap() error { return ErrBarrierNotReady }

// BarrierNotEmptyError is returned (it matches ErrBarrierNotEmpty) when
// participants were still inside when the wait to leave ended.
type BarrierNotEmptyError struct {
	Name      string
	Remaining []string
}

func (e *BarrierNotEmptyError) Error() string {
	return fmt.Sprintf("double barrier %q: %d participants have not left", e.Name, len(e.Remaining))
}

// Unwrap makes errors.Is(err, ErrBarrierNotEmpty) hold.
func (e *BarrierNotEmptyError) Unwrap() error { return ErrBarrierNotEmpty }

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

// Enter enrols participant id in the double barrier for lease and returns once at
// least count participants have entered. When wait (0: look once) ends first it
// returns a BarrierNotReadyError and the participant stays enrolled; entering
// again with the same lease goes on waiting. While a request waits, an implicit
// lease cannot expire: its TTL counts from the end of the request. When ctx ends
// (the client went away) an enrolment made by this call is withdrawn. An id
// enrolled by another lease or another client is ErrParticipantExists (the other
// lease is never handed over, nor named). A count other than the barrier's (the
// count of the oldest present participant) is a CountMismatchError. On every
// failure but BarrierNotReadyError an implicit lease ends.
func (b *Barriers) Enter(ctx context.Context, lease *Lease, name, id string, count int, wait time.Duration) (_ *DoubleBarrierEntered, err error) {
	if err := CheckName("double barrier", name); err != nil {
		endImplicit(lease)
		return nil, err
	}
	if err := CheckName("participant", id); err != nil {
		endImplicit(lease)
		return nil, err
	}
	if count < 1 || count > maxCount {
		endImplicit(lease)
		return nil, fmt.Errorf("count %d: must be between 1 and %d: %w", count, maxCount, ErrInvalidArgument)
	}
	start := time.Now()
	defer func() { b.metrics.observe("enter", start, err) }()
	key := name + "/" + id
	b.mu.Lock()
	prev := b.enrolled[key]
	b.mu.Unlock()
	if prev != nil && prev.lease != lease && prev.lease.Err() == nil {
		if len(lease.Holds()) == 0 {
			endImplicit(lease)
		}
		return nil, fmt.Errorf("participant %q of %q is enrolled by another lease: %w", id, name, ErrParticipantExists)
	}
	h := Hold{Kind: dblKind, Name: key}
	existing, ok, err := lease.reserve(h)
	if err != nil {
		return nil, err
	}
	var p *dblParticipant
	enrolled := false
	if ok {
		p = existing.(*dblParticipant)
		if p.count != count {
			return nil, &CountMismatchError{Name: name, Count: p.count}
		}
	} else {
		if p, err = b.enrol(ctx, lease, h, name, id, count); err != nil {
			lease.unreserve(h)
			return nil, err
		}
		enrolled = true
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
	if enrolled && ctx.Err() != nil {
		// The client went away: leave nothing behind.
		if held, terr := lease.take(h); terr == nil {
			cctx, cancel := context.WithTimeout(context.Background(), b.s.cfg.OpTimeout)
			_ = held.release(cctx)
			cancel()
			lease.released()
		}
	}
	return nil, err
}

// enrol creates the participant node and grants it to lease.
func (b *Barriers) enrol(ctx context.Context, lease *Lease, h Hold, name, id string, count int) (*dblParticipant, error) {
	ep := lease.ep
	if err := lease.connected(); err != nil {
		return nil, fmt.Errorf("double barrier %q: %w", name, err)
	}
	parent := b.dblParent(name)
	node := parent + "/" + participantPref + id
	data := []byte(strconv.Itoa(count) + "\n" + lease.ID)
	for {
		err := ep.call(ctx, func(c *zk.Conn) error {
			_, err := c.Create(node, data, zk.FlagEphemeral, openACL)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			if err := ensureContainer(ctx, ep, parent); err != nil {
				return nil, err
			}
			continue
		}
		if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			if err := waitConnected(ctx, ep); err != nil {
				return nil, err
			}
			continue // NodeExists next if the create went through: adopted below
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return nil, fmt.Errorf("enter double barrier %q: %w", name, err)
		}
		var got []byte
		var st *zk.Stat
		gerr := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			got, st, err = c.Get(node)
			return err
		})
		if errors.Is(gerr, zk.ErrNoNode) {
			continue
		}
		if gerr != nil {
			return nil, gerr
		}
		if st.EphemeralOwner != ep.id.Load() || !strings.HasSuffix(string(got), "\n"+lease.ID) {
			return nil, fmt.Errorf("participant %q of %q: %w", id, name, ErrParticipantExists)
		}
		if err := b.checkCount(ctx, ep, parent, node, st.Czxid, name, count, lease.ID); err != nil {
			return nil, err
		}
		p := &dblParticipant{key: h.Name, name: name, node: node, czxid: st.Czxid, count: count, lease: lease, ep: ep}
		release := func(ctx context.Context) error {
			b.mu.Lock()
			if b.enrolled[p.key] == p {
				delete(b.enrolled, p.key)
			}
			b.mu.Unlock()
			b.metrics.participants.Dec()
			return settle(ctx, ep, func(ctx context.Context) error { return b.dropParticipant(ctx, ep, parent, node, lease.ID) })
		}
		b.mu.Lock()
		b.enrolled[p.key] = p
		b.mu.Unlock()
		b.metrics.participants.Inc()
		if err := lease.grant(h, p, release); err != nil {
			cctx, cancel := context.WithTimeout(context.Background(), b.s.cfg.OpTimeout)
			_ = release(cctx)
			cancel()
			return nil, err
		}
		return p, nil
	}
}

// checkCount compares count with the barrier's: the count of the oldest present
// participant (smallest czxid; ours when none is older). On a mismatch it deletes
// our node (made at czxid) and returns a CountMismatchError. Every participant
// compares itself with the same oldest one, so all that pass agree on the count
// until the barrier empties.
func (b *Barriers) checkCount(ctx context.Context, ep *epoch, parent, node string, czxid int64, name string, count int, leaseID string) error {
	var children []string
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		children, _, err = c.Children(parent)
		return err
	})
	if err != nil {
		return b.undoEnrol(ep, parent, node, leaseID, fmt.Errorf("enter double barrier %q: %w", name, err))
	}
	self := node[len(parent)+1:]
	others := slices.DeleteFunc(participants(children), func(s string) bool { return s == self })
	counts, czxids, err := b.participantCounts(ctx, ep, parent, others)
	if err != nil {
		return b.undoEnrol(ep, parent, node, leaseID, fmt.Errorf("enter double barrier %q: %w", name, err))
	}
	oldest, want := czxid, count
	for i := range others {
		if czxids[i] > 0 && czxids[i] < oldest && counts[i] > 0 {
			oldest, want = czxids[i], counts[i]
		}
	}
	if want != count {
		return b.undoEnrol(ep, parent, node, leaseID, &CountMismatchError{Name: name, Count: want})
	}
	return nil
}

// undoEnrol deletes a participant node that was not granted, with a fresh bounded
// context, and returns err.
func (b *Barriers) undoEnrol(ep *epoch, parent, node, leaseID string, err error) error {
	cctx, cancel := context.WithTimeout(context.Background(), b.s.cfg.OpTimeout)
	defer cancel()
	_ = settle(cctx, ep, func(ctx context.Context) error { return b.dropParticipant(ctx, ep, parent, node, leaseID) })
	return err
}

// participantCounts reads the count and czxid of each participant node (0, 0 for
// one that is gone or carries no count).
func (b *Barriers) participantCounts(ctx context.Context, ep *epoch, parent string, parts []string) (counts []int, czxids []int64, err error) {
	counts, czxids = make([]int, len(parts)), make([]int64, len(parts))
	if len(parts) == 0 {
		return counts, czxids, nil
	}
	fns := make([]func() error, len(parts))
	for i, n := range parts {
		fns[i] = func() error {
			var data []byte
			var st *zk.Stat
			err := ep.call(ctx, func(c *zk.Conn) error {
				var err error
				data, st, err = c.Get(parent + "/" + n)
				return err
			})
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			if err != nil {
				return err
			}
			first, _, _ := strings.Cut(string(data), "\n")
			counts[i], _ = strconv.Atoi(first)
			czxids[i] = st.Czxid
			return nil
		}
	}
	return counts, czxids, parallel(fns...)
}

// dropParticipant deletes a participant node made for leaseID, then deletes
// "ready" when no participant is left.
func (b *Barriers) dropParticipant(ctx context.Context, ep *epoch, parent, node, leaseID string) error {
	var data []byte
	var st *zk.Stat
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(node)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
	case err != nil:
		return err
	case st.EphemeralOwner == ep.id.Load() && strings.HasSuffix(string(data), "\n"+leaseID):
		err = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(node, st.Version) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
	return b.clearReadyIfEmpty(ctx, ep, parent)
}

// clearReadyIfEmpty deletes "ready" when no participant is left. Should a new
// round make "ready" just between the listing and the delete, its waiters see it
// go and make it again.
func (b *Barriers) clearReadyIfEmpty(ctx context.Context, ep *epoch, parent string) error {
	var children []string
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		children, _, err = c.Children(parent)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(participants(children)) > 0 || !slices.Contains(children, readyNode) {
		return nil
	}
	err = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(parent+"/"+readyNode, -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
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

// awaitReady waits until "ready" is current for p.
func (b *Barriers) awaitReady(ctx context.Context, lease *Lease, p *dblParticipant, count int, wait time.Duration) error {
	d := newDeadline(wait)
	defer d.stop()
	ep := p.ep
	parent := b.dblParent(p.name)
	readyPath := parent + "/" + readyNode
	self := p.node[len(parent)+1:]
	for {
		var (
			ready    bool
			readySt  *zk.Stat
			watch    <-chan zk.Event
			children []string
		)
		err := parallel(
			func() error {
				return ep.call(ctx, func(c *zk.Conn) error {
					var err error
					ready, readySt, watch, err = c.ExistsW(readyPath)
					return err
				})
			},
			func() error {
				return ep.call(ctx, func(c *zk.Conn) error {
					var err error
					children, _, err = c.Children(parent)
					return err
				})
			})
		if errors.Is(err, zk.ErrNoNode) {
			err = nil // the container went with its last child: ours too
		}
		if err != nil {
			if errors.Is(err, ErrUnavailable) && ctx.Err() == nil && !d.expired() {
				if werr := waitConnected(ctx, ep); werr != nil {
					return werr
				}
				continue
			}
			return err
		}
		parts := participants(children)
		if !slices.Contains(parts, self) {
			if lease.Err() != nil {
				return fmt.Errorf("lease %q: %w", lease.ID, ErrLeaseEnded)
			}
			return fmt.Errorf("participant node %s vanished: %w", p.node, ErrSessionLost)
		}
		if ready {
			current, err := b.readyIsCurrent(ctx, ep, parent, self, p.czxid, readySt.Czxid, parts)
			if err != nil {
				continue // retried above through the same error handling
			}
			if current {
				return nil
			}
			// Left over from an earlier round: delete it and count afresh.
			err = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(readyPath, readySt.Version) })
			if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrBadVersion) {
				return err
			}
			continue
		}
		if len(parts) >= count {
			enough, err := b.enoughWithCount(ctx, ep, parent, parts, count)
			if err == nil && enough {
				err = ep.call(ctx, func(c *zk.Conn) error {
					_, err := c.Create(readyPath, []byte(strconv.Itoa(count)), zk.FlagPersistent, openACL)
					return err
				})
				if err == nil || errors.Is(err, zk.ErrNodeExists) {
					continue
				}
			}
			if err != nil {
				if !errors.Is(err, ErrUnavailable) {
					return err
				}
				continue // retried above through the same error handling
			}
		}
		if d.expired() {
			return &BarrierNotReadyError{Name: p.name, Count: count, Participants: len(parts), Lease: lease.ID}
		}
		select {
		case <-watch:
		case <-d.C:
			return &BarrierNotReadyError{Name: p.name, Count: count, Participants: len(parts), Lease: lease.ID}
		case <-ctx.Done():
			return ctx.Err()
		case <-lease.Ending():
			return fmt.Errorf("lease %q: %w", lease.ID, ErrLeaseEnded)
		case <-ep.lost:
			return ErrSessionLost
		}
	}
}

// enoughWithCount reports whether at least count of parts entered with count: a
// participant with another count (refused, but not yet deleted) never makes a
// barrier ready.
func (b *Barriers) enoughWithCount(ctx context.Context, ep *epoch, parent string, parts []string, count int) (bool, error) {
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

// readyIsCurrent reports whether the "ready" made at readyCzxid belongs to the
// present round: made after our own node, or after some present participant.
func (b *Barriers) readyIsCurrent(ctx context.Context, ep *epoch, parent, self string, selfCzxid, readyCzxid int64, parts []string) (bool, error) {
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
			return ep.call(ctx, func(c *zk.Conn) error {
				_, st, err := c.Exists(parent + "/" + o)
				if err == nil && st != nil {
					czxids[i] = st.Czxid
				}
				return err
			})
		}
	}
	if err := parallel(fns...); err != nil {
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
func (b *Barriers) Leave(ctx context.Context, lease *Lease, name, id string, wait time.Duration) (err error) {
	if err := CheckName("double barrier", name); err != nil {
		return err
	}
	if err := CheckName("participant", id); err != nil {
		return err
	}
	start := time.Now()
	defer func() { b.metrics.observe("leave", start, err) }()
	ep, err := b.s.current()
	if err != nil {
		return err
	}
	h := Hold{Kind: dblKind, Name: name + "/" + id}
	var held *held
	if lease != nil {
		held, _ = lease.take(h)
	}
	if held != nil {
		err := held.release(ctx)
		lease.released()
		if err != nil {
			return err
		}
	} else {
		var exists bool
		node := b.dblParent(name) + "/" + participantPref + id
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			exists, _, err = c.Exists(node)
			return err
		})
		if err != nil {
			return err
		}
		if exists {
			if lease == nil {
				return fmt.Errorf("participant %q of %q: %w", id, name, ErrLeaseNotFound)
			}
			return fmt.Errorf("participant %q of %q: %w", id, name, ErrNotHeld)
		}
	}
	return b.awaitEmpty(ctx, name, wait)
}

// awaitEmpty waits until no participant is left, watching the lowest remaining.
func (b *Barriers) awaitEmpty(ctx context.Context, name string, wait time.Duration) error {
	d := newDeadline(wait)
	defer d.stop()
	parent := b.dblParent(name)
	for {
		changed := b.s.Changed()
		ep, err := b.s.current()
		var children []string
		if err == nil {
			err = ep.call(ctx, func(c *zk.Conn) error {
				var err error
				children, _, err = c.Children(parent)
				return err
			})
		}
		if errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		if err != nil {
			if waitOutSession(ctx, err, changed, d) {
				continue
			}
			return err
		}
		parts := participants(children)
		if len(parts) == 0 {
			return b.clearReadyIfEmpty(ctx, ep, parent)
		}
		gone, err := awaitGone(ctx, b.s, parent+"/"+parts[0], d)
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
	if err := CheckName("double barrier", name); err != nil {
		return nil, err
	}
	ep, err := b.s.current()
	if err != nil {
		return nil, err
	}
	parent := b.dblParent(name)
	var children []string
	err = ep.call(ctx, func(c *zk.Conn) error {
		var err error
		children, _, err = c.Children(parent)
		return err
	})
	st := &DoubleBarrierState{Name: name, Participants: []string{}}
	if errors.Is(err, zk.ErrNoNode) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	parts := participants(children)
	st.Participants = participantIDs(parts)
	st.Ready = slices.Contains(children, readyNode)
	if st.Ready {
		var data []byte
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			data, _, err = c.Get(parent + "/" + readyNode)
			return err
		})
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
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
	var oldest int64
	for i, c := range counts {
		if c > 0 && (oldest == 0 || czxids[i] < oldest) {
			oldest, st.Count = czxids[i], c
		}
	}
	return st, nil
}
