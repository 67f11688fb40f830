package partition

import (
	"context"
	"encoding/json"
	"errors"
	"sort"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// member is a live member node as read.
type member struct {
	id           string
	data         memberData
	czxid, mzxid int64
	session      int64 // ephemeral owner
}

// owner is an owner node as read.
type owner struct {
	ownerData
	czxid int64
}

// source is the kit.Source of one group: it reads the set, the members, the
// plan and the owners, writes the plan while this sidecar's session holds the
// earliest member, and takes the free partitions dealt to this sidecar's members.
type source struct {
	p     *Partitions
	group string
	gp    string

	// Guarded by the Watches' lock.
	set      Set
	setMzxid int64
	members  kit.Children[member]
	owners   kit.Children[owner]
	plan     *planData
	planVer  int32 // the plan node's data version (compare-and-set)
	planZxid int64 // its mzxid
	planRead bool  // the plan node exists

	leading bool // on the follower's goroutine only
	owned   int  // partitions owned by this sidecar's members, as last counted
}

func (p *Partitions) newSource(group string) *source {
	gp := p.groupPath(group)
	return &source{p: p, group: group, gp: gp,
		members: kit.Children[member]{Part: "members", Dir: gp + "/members",
			Decode: func(n string, data []byte, st *zookeeper.Stat) (member, bool) {
				return member{id: n, data: decodeMember(data), czxid: st.Czxid, mzxid: st.Mzxid, session: st.EphemeralOwner}, kit.ValidName(n)
			}},
		owners: kit.Children[owner]{Part: "owners", Dir: gp + "/owners",
			Decode: func(n string, data []byte, st *zookeeper.Stat) (owner, bool) {
				return owner{ownerData: decodeOwner(data), czxid: st.Czxid}, kit.ValidName(n)
			}},
	}
}

const (
	partSet  = "set"
	partPlan = "plan"
)

func (s *source) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*State, error) {
	err := zookeeper.Parallel(
		func() error { return s.readSet(ctx, ep, w) },
		func() error { return s.readPlan(ctx, ep, w) },
		func() error { return s.members.Refresh(ctx, ep, w) },
		func() error { return s.owners.Refresh(ctx, ep, w) },
	)
	if err != nil {
		return nil, err
	}
	if err := s.lead(ctx, ep, w); err != nil {
		return nil, err
	}
	s.take(ctx, ep, w)
	var st *State
	w.Do(func() { st = s.viewLocked() })
	s.countOwned(st, ep)
	return st, nil
}

func (s *source) readSet(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	if !w.Need(partSet) {
		return nil
	}
	data, st, ch, err := ep.GetW(ctx, s.gp)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return kit.WatchAbsent(ctx, ep, w, partSet, s.gp, func() { s.set, s.setMzxid = Set{}, 0 })
	}
	if err != nil {
		return err
	}
	w.Do(func() { s.set, s.setMzxid = decodeSet(data), st.Mzxid })
	w.Armed(partSet, ch, nil)
	return nil
}

func (s *source) readPlan(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	if !w.Need(partPlan) {
		return nil
	}
	pp := s.gp + "/plan"
	data, st, ch, err := ep.GetW(ctx, pp)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return kit.WatchAbsent(ctx, ep, w, partPlan, pp, func() { s.plan, s.planRead, s.planZxid = nil, false, 0 })
	}
	if err != nil {
		return err
	}
	var plan planData
	if json.Unmarshal(data, &plan) != nil {
		plan = planData{} // unreadable: the leader writes over it
	}
	w.Do(func() { s.plan, s.planVer, s.planZxid, s.planRead = &plan, st.Version, st.Mzxid, true })
	w.Armed(partPlan, ch, nil)
	return nil
}

// lineLocked is the live members in join order.
func (s *source) lineLocked() []member {
	line := make([]member, 0, len(s.members.Data))
	for _, m := range s.members.Data {
		line = append(line, m)
	}
	sort.Slice(line, func(i, j int) bool { return line[i].czxid < line[j].czxid })
	return line
}

// lead writes the plan when this sidecar's session holds the earliest member
// and the plan there differs from the one computed. A write that loses its
// compare-and-set is counted and left: the watch on what changed reads again.
func (s *source) lead(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) error {
	var line []member
	var set []string
	var prev *planData
	var ver int32
	var exists bool
	w.Do(func() {
		line, prev, ver, exists = s.lineLocked(), s.plan, s.planVer, s.planRead
		if s.set.Count > 0 || s.set.Names != nil {
			set = s.set.List()
		}
	})
	leading := len(line) > 0 && line[0].session == ep.ID()
	s.setLeading(leading)
	if !leading || set == nil {
		return nil
	}
	members := make([]Weighted, len(line))
	for i, m := range line {
		members[i] = Weighted{ID: m.id, Weight: m.data.Weight}
	}
	next := computePlan(set, members, prev)
	if prev != nil && samePlan(prev, next) {
		return nil
	}
	next.Leader, next.Term = line[0].id, line[0].czxid
	if prev != nil && prev.Term > next.Term {
		s.p.metrics.conflicts.Inc()
		return nil // a later leader wrote: this one is about to see its node gone
	}
	data, err := json.Marshal(next)
	if err != nil {
		return err
	}
	ops := []zookeeper.Op{zookeeper.CheckOp{Path: s.gp + "/members/" + line[0].id, Version: -1}}
	if exists {
		ops = append(ops, zookeeper.SetOp{Path: s.gp + "/plan", Data: data, Version: ver})
	} else {
		ops = append(ops, zookeeper.CreateOp{Path: s.gp + "/plan", Data: data, Mode: zookeeper.Persistent})
	}
	_, err = ep.Multi(ctx, ops...)
	switch {
	case err == nil:
		s.p.metrics.plans.Inc()
		w.Poke() // the plan's watch brings it back with its zxid
		return nil
	case errors.Is(err, zookeeper.ErrBadVersion), errors.Is(err, zookeeper.ErrNodeExists), errors.Is(err, zookeeper.ErrNoNode):
		s.p.metrics.conflicts.Inc()
		return nil
	}
	return err
}

// take makes the owner node of every free partition the plan deals to a
// member this sidecar holds under ep.
func (s *source) take(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) {
	locals := s.p.locals(s.group)
	if len(locals) == 0 {
		return
	}
	want := map[*membership][]string{}
	w.Do(func() {
		if s.plan == nil {
			return
		}
		for name, id := range s.plan.assignment() {
			m := locals[id]
			if m == nil || m.ep != ep {
				continue
			}
			if _, taken := s.owners.Data[name]; taken || containsName(s.owners.Names, name) {
				continue
			}
			want[m] = append(want[m], name)
		}
	})
	fns := make([]func() error, 0, len(want))
	for m, names := range want {
		fns = append(fns, func() error { m.take(ctx, names); return nil })
	}
	_ = zookeeper.Parallel(fns...)
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// viewLocked builds the state from what was read.
func (s *source) viewLocked() *State {
	st := &State{Group: s.group, PlanVersion: s.planZxid, Partitions: []string{}, Members: []MemberState{}, Moving: []Move{},
		czxid: map[string]int64{}}
	if s.set.Count > 0 || s.set.Names != nil {
		st.Partitions = s.set.List()
	}
	st.Version = max(s.setMzxid, s.planZxid, s.members.Pzxid, s.owners.Pzxid)
	line := s.lineLocked()
	if len(line) > 0 {
		st.Leader = line[0].id
	}
	var assigned map[string]string
	if s.plan != nil {
		assigned = s.plan.assignment()
	}
	index := s.addMembers(st, line)
	addAssigned(st, assigned, index)
	ownerOf := s.addOwned(st, line, index)
	if len(line) > 0 { // with no member, nothing is moving
		st.Moving = append(st.Moving, moving(st.Partitions, assigned, ownerOf)...)
	}
	return st
}

// addMembers adds the line's members to st, in line order, and returns each
// one's index in st.Members by id.
func (s *source) addMembers(st *State, line []member) map[string]int {
	index := map[string]int{}
	for i, m := range line {
		index[m.id] = i
		st.czxid[m.id] = m.czxid
		st.Version = max(st.Version, m.mzxid)
		st.Members = append(st.Members, MemberState{Group: s.group, ID: m.id, Weight: m.data.Weight,
			Assigned: []string{}, Owned: []Owned{}, Version: max(s.planZxid, m.mzxid)})
	}
	return index
}

// addAssigned gives each live member the partitions of the set the plan
// assigns it, in set order.
func addAssigned(st *State, assigned map[string]string, index map[string]int) {
	for _, name := range st.Partitions {
		if id, ok := assigned[name]; ok {
			if i, live := index[id]; live {
				st.Members[i].Assigned = append(st.Members[i].Assigned, name)
			}
		}
	}
}

// addOwned gives each live member the partitions it owns (an owner node of
// its own incarnation), in set order, then any owned partition no longer in
// the set; it returns each owned partition's owner.
func (s *source) addOwned(st *State, line []member, index map[string]int) map[string]string {
	ownerOf := map[string]string{}
	order := append(append([]string{}, st.Partitions...), s.owners.Names...)
	for _, name := range order {
		o, ok := s.owners.Data[name]
		if !ok || ownerOf[name] != "" {
			continue
		}
		i, live := index[o.Member]
		if !live || line[i].czxid != o.Incarnation {
			continue
		}
		ownerOf[name] = o.Member
		ms := &st.Members[i]
		ms.Owned = append(ms.Owned, Owned{Partition: name, FencingToken: o.czxid})
		ms.Version = max(ms.Version, o.czxid)
	}
	return ownerOf
}

// moving is every partition of the set that is not owned by the member the
// plan assigns it, or that the plan assigns to nobody.
func moving(partitions []string, assigned, ownerOf map[string]string) []Move {
	var moves []Move
	for _, name := range partitions {
		if ownerOf[name] != assigned[name] || assigned[name] == "" {
			moves = append(moves, Move{Partition: name, Owner: ownerOf[name], Assigned: assigned[name]})
		}
	}
	return moves
}

func (s *source) Reset() {
	s.set, s.setMzxid = Set{}, 0
	s.members.Reset()
	s.owners.Reset()
	s.plan, s.planVer, s.planZxid, s.planRead = nil, 0, 0, false
}

// Uncertain is the last state, marked Suspended, during the first part of a
// suspension; then (or while there is no session) the last state with nothing
// owned and no leader.
func (s *source) Uncertain(last *State, loaded bool, u kit.Uncertainty) *State {
	s.setLeading(false)
	if u.Keep && loaded && last != nil {
		cp := *last
		cp.Suspended, cp.SuspendedSince = true, u.Since
		return &cp
	}
	s.countOwned(nil, nil)
	st := &State{Group: s.group, Partitions: []string{}, Members: []MemberState{}, Moving: []Move{}}
	if loaded && last != nil {
		cp := *last
		cp.Members = make([]MemberState, len(last.Members))
		for i, m := range last.Members {
			m.Owned = []Owned{}
			cp.Members[i] = m
		}
		cp.Leader = ""
		st = &cp
	}
	st.Suspended, st.SuspendedSince, st.doubted = true, u.Since, true
	return st
}

func (s *source) Same(a, b *State) bool {
	if a.Suspended != b.Suspended || a.doubted != b.doubted || !a.SuspendedSince.Equal(b.SuspendedSince) || a.Leader != b.Leader {
		return false
	}
	if a.Suspended && owned(a) != owned(b) {
		return false
	}
	return a.Version == b.Version && len(a.Members) == len(b.Members) && len(a.Moving) == len(b.Moving)
}

// owned counts the partitions a state shows owned.
func owned(st *State) int {
	n := 0
	for _, m := range st.Members {
		n += len(m.Owned)
	}
	return n
}

func (s *source) Stop() {
	s.setLeading(false)
	s.countOwned(nil, nil)
}

func (s *source) setLeading(leading bool) {
	switch {
	case leading && !s.leading:
		s.p.metrics.led.Inc()
	case !leading && s.leading:
		s.p.metrics.led.Dec()
	}
	s.leading = leading
}

// countOwned keeps the owned gauge: the partitions st shows owned by members
// this sidecar holds under ep.
func (s *source) countOwned(st *State, ep *zookeeper.Epoch) {
	n := 0
	if st != nil {
		locals := s.p.locals(s.group)
		for _, m := range st.Members {
			if l := locals[m.ID]; l != nil && l.ep == ep {
				n += len(m.Owned)
			}
		}
	}
	s.p.metrics.owned.Add(float64(n - s.owned))
	s.owned = n
}
