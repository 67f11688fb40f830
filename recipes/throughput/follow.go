package throughput

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// ThroughputFollower follows one group. However many followers a group has on
// this sidecar (members, streams, long-polls), the sidecar runs one
// kit.Follower for it: a watch on the group node, on the members' list, on
// each member's data and on the allocation, each re-armed only when it fires,
// and one cached state. The same follower computes and publishes the
// allocation while this sidecar owns the group's first member node.
type ThroughputFollower = kit.Follower[*ThroughputGroup]

// Follow starts following group; Close stops. The first state is available
// once read (Changed closes then).
func (t *Throughputs) Follow(group string) (*ThroughputFollower, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	return t.followers.Follow(group), nil
}

// await waits up to d (and while ctx lasts) for a state, read under a connected
// session, for which cond holds. It returns the last state seen (nil when none
// was read yet) and whether cond held for it.
func await(ctx context.Context, f *ThroughputFollower, d time.Duration, cond func(*ThroughputGroup) bool) (*ThroughputGroup, bool) {
	return f.Await(ctx, d, func(g *ThroughputGroup) bool { return !g.Suspended && cond(g) })
}

// The parts of a group a source watches (kit.Watches' names).
const (
	partGroup   = "group"
	partMembers = "members"
	partAlloc   = "allocation"
	// partMember+node is a member's data.
	partMember = "member/"
)

// groupSource is the kit.Source of one group: it reads the group, its members
// and its allocation, and leads (computes and writes the allocation) while
// this sidecar's session owns the first member node.
type groupSource struct {
	t     *Throughputs
	group string
	gp    string

	// What was read, valid while the part's watch is armed (a member's data:
	// while it is in members). Guarded by the Watches' lock (w.Do), under which
	// fired callbacks run; Reset runs when no callback can.
	exists   bool
	limit    int64
	names    []string          // member nodes in sequence order
	members  map[string]member // node → data (each with a data watch)
	alloc    *allocationData
	allocVer int32

	// leading counts this group in the led gauge. Only the follower's
	// goroutine touches it (Read, Uncertain, Stop).
	leading bool
}

func (t *Throughputs) newSource(group string) *groupSource {
	return &groupSource{t: t, group: group, gp: t.groupPath(group), members: map[string]member{}}
}

// Read reads again what no armed watch covers, leads when this sidecar owns the
// first member, and returns the group as cached. A write that loses its
// compare-and-set is no error: the watch on what changed makes it read again.
func (s *groupSource) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*ThroughputGroup, error) {
	if err := s.refresh(ctx, ep, w); err != nil {
		return nil, err
	}
	if err := s.lead(ctx, ep, w); err != nil {
		return nil, err
	}
	var st *ThroughputGroup
	w.Do(func() { st = view(s.group, s.limit, s.lineLocked(), s.alloc) })
	return st, nil
}

// Reset forgets everything read under an earlier session: its watches are gone.
func (s *groupSource) Reset() {
	s.exists, s.limit = false, 0
	s.names, s.members, s.alloc, s.allocVer = nil, map[string]member{}, nil, 0
}

// Uncertain is the last state marked Suspended (possibly stale), without its
// leader once the session could have expired (u.Keep false); this sidecar does
// not lead while it cannot read.
func (s *groupSource) Uncertain(last *ThroughputGroup, loaded bool, u kit.Uncertainty) *ThroughputGroup {
	s.setLeading(false)
	st := &ThroughputGroup{Group: s.group, Members: []ThroughputMember{}}
	if loaded && last != nil {
		cp := *last
		st = &cp
	}
	if !u.Keep {
		st.Leader = ""
	}
	st.Suspended, st.SuspendedSince = true, u.Since
	return st
}

// Same tells that b shows nothing new after a: as suspended as a (since the
// same time), with the same leader, version, limit and live members.
func (s *groupSource) Same(a, b *ThroughputGroup) bool {
	return a.Suspended == b.Suspended && a.SuspendedSince.Equal(b.SuspendedSince) && a.Leader == b.Leader &&
		a.Version == b.Version && a.Limit == b.Limit && maps.Equal(a.live, b.live)
}

// Stop drops this group from the led gauge when its follower stops.
func (s *groupSource) Stop() { s.setLeading(false) }

// refresh reads again what is not covered by an armed watch: the group, the
// members' list and the allocation together, then the data of the members not
// read yet (pipelined).
func (s *groupSource) refresh(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	var fns []func() error
	if w.Need(partGroup) {
		fns = append(fns, func() error { return s.readGroup(ctx, ep, w) })
	}
	if w.Need(partMembers) {
		fns = append(fns, func() error { return s.readMembers(ctx, ep, w) })
	}
	if w.Need(partAlloc) {
		fns = append(fns, func() error { return s.readAlloc(ctx, ep, w) })
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return err
	}
	var missing []string
	w.Do(func() {
		for _, n := range s.names {
			if _, ok := s.members[n]; !ok {
				missing = append(missing, n)
			}
		}
	})
	fns = fns[:0]
	for _, n := range missing {
		fns = append(fns, func() error { return s.readMember(ctx, ep, w, n) })
	}
	return zookeeper.Parallel(fns...)
}

func (s *groupSource) readGroup(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	data, _, ch, err := ep.GetW(ctx, s.gp)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return kit.WatchAbsent(ctx, ep, w, partGroup, s.gp, func() { s.exists, s.limit = false, 0 })
	}
	if err != nil {
		return err
	}
	w.Do(func() { s.exists, s.limit = true, decodeGroup(data) })
	w.Armed(partGroup, ch, nil)
	return nil
}

func (s *groupSource) readMembers(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	mp := s.gp + "/members"
	names, _, ch, err := ep.ChildrenW(ctx, mp)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return kit.WatchAbsent(ctx, ep, w, partMembers, mp, func() { s.names = nil })
	}
	if err != nil {
		return err
	}
	line := zookeeper.SortBySeq(names)
	keep := make(map[string]bool, len(line))
	for _, n := range line {
		keep[n] = true
	}
	w.Do(func() {
		s.names = line
		maps.DeleteFunc(s.members, func(n string, _ member) bool { return !keep[n] })
	})
	w.Armed(partMembers, ch, nil)
	return nil
}

func (s *groupSource) readAlloc(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	ap := s.gp + "/allocation"
	data, st, ch, err := ep.GetW(ctx, ap)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return kit.WatchAbsent(ctx, ep, w, partAlloc, ap, func() { s.alloc = nil })
	}
	if err != nil {
		return err
	}
	a, derr := decodeAllocation(data)
	if derr != nil {
		a = &allocationData{} // unreadable: the leader writes over it
	}
	w.Do(func() { s.alloc, s.allocVer = a, st.Version })
	w.Armed(partAlloc, ch, nil)
	return nil
}

func (s *groupSource) readMember(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches, node string) error {
	data, st, ch, err := ep.GetW(ctx, s.gp+"/members/"+node)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil // gone meanwhile: the members' watch reports it
	}
	if err != nil {
		return err
	}
	m := member{node: node, data: decodeMember(node, data), czxid: st.Czxid, owner: st.EphemeralOwner}
	w.Do(func() { s.members[node] = m })
	w.Armed(partMember+node, ch, func() { delete(s.members, node) })
	return nil
}

// lineLocked returns the live members read, in join order. The Watches' lock
// is held.
func (s *groupSource) lineLocked() []member {
	line := make([]member, 0, len(s.names))
	for _, n := range s.names {
		if m, ok := s.members[n]; ok {
			line = append(line, m)
		}
	}
	return line
}

// lead publishes the allocation when this sidecar's session owns the first
// member node (or the group has no member and its allocation still lists some).
// A write that loses its compare-and-set is counted and left: the watch on
// whatever changed (allocation or members) wakes the follower to read again.
func (s *groupSource) lead(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	var line []member
	var exists bool
	var limit int64
	var prev *allocationData
	var ver int32
	w.Do(func() { line, exists, limit, prev, ver = s.lineLocked(), s.exists, s.limit, s.alloc, s.allocVer })
	leading := len(line) > 0 && line[0].owner == ep.ID()
	s.setLeading(leading)
	var next *allocationData
	switch {
	case leading:
		next = compute(limit, line)
	case len(line) == 0:
		next = emptyAllocation(exists, limit, line)
	}
	if next == nil || (prev != nil && sameAllocation(prev, next)) {
		return nil
	}
	newVer, err := writeAllocation(ctx, ep, s.gp+"/allocation", prev, ver, next)
	switch {
	case err == nil:
		s.t.metrics.allocations.Inc()
		w.Do(func() {
			if s.alloc == prev { // nothing newer was read meanwhile
				s.alloc, s.allocVer = next, newVer
			}
		})
		return nil
	case errors.Is(err, zookeeper.ErrBadVersion), errors.Is(err, zookeeper.ErrNodeExists), errors.Is(err, zookeeper.ErrNoNode):
		s.t.metrics.conflicts.Inc()
		return nil
	case errors.Is(err, errStaleTerm):
		s.t.metrics.conflicts.Inc()
		s.t.s.Logger().Warn("throughput allocation not written: a higher term wrote it", "group", s.group, "err", err)
		return nil
	}
	return err
}

func (s *groupSource) setLeading(leading bool) {
	switch {
	case leading && !s.leading:
		s.t.metrics.led.Inc()
	case !leading && s.leading:
		s.t.metrics.led.Dec()
	}
	s.leading = leading
}
