package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// MemberKind is the kind of a partition-group member's hold on its lease
// (kit.Hold), named "<group>/<member id>".
const MemberKind = "partitions"

const kind = MemberKind

func hold(group, id string) kit.Hold { return kit.Hold{Kind: kind, Name: group + "/" + id} }

// membership is what a lease holds for one member: its node, the owner nodes
// it made, and a follower of its group kept open while it is held (so that
// this sidecar takes what is dealt to it, and leads when it is first).
type membership struct {
	p         *Partitions
	group, id string
	node      string
	ep        *zookeeper.Epoch
	f         *Follower
	weight    int64

	// mu serialises take, ack and release: no owner node is made for a member
	// once it is gone.
	mu          sync.Mutex
	gone        bool
	incarnation int64           // the member node's czxid; 0 until join made it
	mine        map[string]bool // partitions whose owner node this member made and has not deleted
}

func (p *Partitions) locals(group string) map[string]*membership {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.local[group])
}

// claim reserves group/id for m on this sidecar: false when one of its leases
// holds (or is making) that member already.
func (p *Partitions) claim(m *membership) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	g := p.local[m.group]
	if g == nil {
		g = map[string]*membership{}
		p.local[m.group] = g
	}
	if g[m.id] != nil {
		return false
	}
	g[m.id] = m
	return true
}

func (p *Partitions) unclaim(m *membership) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.local[m.group][m.id] == m {
		delete(p.local[m.group], m.id)
		if len(p.local[m.group]) == 0 {
			delete(p.local, m.group)
		}
	}
}

// Join enrols member id with weight for lease and answers its view once the
// plan deals it its share (or after settleWait). ErrMemberExists when the group
// has a live member with that id. The member leaves when the lease ends.
func (p *Partitions) Join(ctx context.Context, lease *kit.Lease, group, id string, weight int64) (*MemberState, error) {
	m, err := kit.JoinWeighted(ctx, lease, hold(group, id), group, id, weight, MaxWeight, ErrMemberExists, func(ctx context.Context, ep *zookeeper.Epoch) (*membership, error) {
		return p.join(ctx, ep, group, id, weight)
	})
	if err != nil {
		return nil, err
	}
	m.f.Poke()
	// Answer once the plan deals it its share and it took every part of it that
	// is free (what another member still owns comes when that one lets go).
	st, _ := await(ctx, m.f, settleWait, func(st *State) bool {
		me, err := st.member(id)
		if err != nil {
			return false
		}
		if len(st.Partitions) == 0 || len(st.Members) > len(st.Partitions) && st.PlanVersion > 0 {
			return true
		}
		if len(me.Assigned) == 0 {
			return false
		}
		for _, mv := range st.Moving {
			if mv.Assigned == id && mv.Owner == "" {
				return false
			}
		}
		return true
	})
	out := &MemberState{Group: group, ID: id, Weight: weight, Assigned: []string{}, Owned: []Owned{}}
	if st != nil {
		if me, err := st.member(id); err == nil {
			out = me
		}
	}
	out.Lease = lease.ID
	return out, nil
}

func (p *Partitions) join(ctx context.Context, ep *zookeeper.Epoch, group, id string, weight int64) (*membership, error) {
	m := &membership{p: p, group: group, id: id, node: p.groupPath(group) + "/members/" + id, ep: ep, weight: weight, mine: map[string]bool{}}
	if !p.claim(m) {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberExists)
	}
	m.f = p.followers.Follow(group)
	data, _ := json.Marshal(memberData{Weight: weight})
	st, err := ep.CreateOwned(ctx, m.node, data, true)
	if err == nil && st == nil {
		var ok bool
		ok, st, err = ep.Exists(ctx, m.node)
		if err == nil && !ok {
			err = fmt.Errorf("%s: %w", m.node, zookeeper.ErrNoNode)
		}
	}
	if err != nil {
		p.unclaim(m)
		m.f.Close()
		if errors.Is(err, zookeeper.ErrNodeExists) {
			return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberExists)
		}
		return nil, fmt.Errorf("join %q: %w", group, err)
	}
	// m was visible to the group's follower from claim on (another member of
	// the group on this sidecar keeps it running), so the incarnation is set
	// under m.mu, where take reads it.
	m.mu.Lock()
	m.incarnation = st.Czxid
	m.mu.Unlock()
	p.metrics.members.Inc()
	return m, nil
}

// Adopt re-creates lease's membership h from its saved member node after a
// restart that resumed the session (a kit.Adopter), wired as join wires a new
// one: the node must be the session's own (its czxid, the incarnation, is
// kept, so every fencing token stays valid); the partitions it owns are the
// owner nodes of the session that name it with that incarnation, read again,
// so that an ack or a release lets them go; it is this sidecar's member of the
// group again (taking what the plan deals it), and the group's follower is
// opened, so this sidecar leads the group again while the member is first:
// with the members unchanged, the leader computes the plan already published
// and writes nothing, and no partition moves. The session's owner nodes that
// name the member with another incarnation, or all of them when the member
// node is not the session's, are deleted: nobody could let them go otherwise
// (not when the node could not be read for want of a connection: the restore
// tries again once the session is back).
func (p *Partitions) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	group, id, _ := strings.Cut(h.Name, "/")
	if kit.CheckName("group", group) != nil || kit.CheckName("member", id) != nil {
		return nil, fmt.Errorf("partition member %q: not <group>/<member id>", h.Name)
	}
	ep := lease.Epoch()
	node := p.groupPath(group) + "/members/" + id
	if len(h.Nodes) != 1 || h.Nodes[0] != node {
		return nil, fmt.Errorf("partition member %q: saved nodes %v are not its node %s", h.Name, h.Nodes, node)
	}
	owned, err := p.ownersOf(ctx, ep, group, id)
	if err != nil {
		return nil, fmt.Errorf("partition member %q: %w", h.Name, err)
	}
	data, st, err := kit.OwnedNode(ctx, lease, node)
	if err != nil {
		if !errors.Is(err, zookeeper.ErrUnavailable) { // else the restore asks again: nothing is known yet
			p.dropOwners(ctx, ep, group, slices.Collect(maps.Keys(owned)))
		}
		return nil, fmt.Errorf("partition member %q: %w", h.Name, err)
	}
	m := &membership{p: p, group: group, id: id, node: node, ep: ep, weight: decodeMember(data).Weight,
		incarnation: st.Czxid, mine: map[string]bool{}}
	var stale []string
	for name, incarnation := range owned {
		if incarnation == st.Czxid {
			m.mine[name] = true
		} else {
			stale = append(stale, name)
		}
	}
	p.dropOwners(ctx, ep, group, stale)
	if !p.claim(m) {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberExists)
	}
	m.f = p.followers.Follow(group)
	p.metrics.members.Inc()
	return m, nil
}

// ownersOf reads the group's owner nodes and returns those of ep's session
// that name member id, with the incarnation each names.
func (p *Partitions) ownersOf(ctx context.Context, ep *zookeeper.Epoch, group, id string) (map[string]int64, error) {
	dir := p.groupPath(group) + "/owners"
	names, _, err := ep.Children(ctx, dir)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	nodes, err := ep.GetEach(ctx, dir, names)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for i, n := range nodes {
		if n.Stat == nil {
			continue // let go meanwhile
		}
		if o := decodeOwner(n.Data); n.Stat.EphemeralOwner == ep.ID() && o.Member == id {
			out[names[i]] = o.Incarnation
		}
	}
	return out, nil
}

// dropOwners deletes the group's owner nodes of names (best effort: what is
// gone already is left).
func (p *Partitions) dropOwners(ctx context.Context, ep *zookeeper.Epoch, group string, names []string) {
	dir := p.groupPath(group) + "/owners/"
	ops := make([]zookeeper.Op, len(names))
	for i, name := range names {
		ops[i] = zookeeper.DeleteOp{Path: dir + name, Version: -1}
	}
	if len(ops) > 0 {
		_ = deleteAll(ctx, ep, ops)
	}
}

// take makes the owner nodes of names (free partitions the plan deals m): all
// in one transaction (one write, one zxid: the same fencing token for the
// partitions taken together), or one by one when some were taken meanwhile.
// Nothing is taken before join made the member's node (incarnation 0): an owner
// node would carry no incarnation; Join pokes the follower once it is made.
func (m *membership) take(ctx context.Context, names []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone || m.incarnation == 0 {
		return
	}
	data, _ := json.Marshal(ownerData{Member: m.id, Incarnation: m.incarnation})
	dir := m.p.groupPath(m.group) + "/owners/"
	slices.Sort(names)
	ops := make([]zookeeper.Op, len(names))
	for i, name := range names {
		ops[i] = zookeeper.CreateOp{Path: dir + name, Data: data, Mode: zookeeper.Ephemeral}
	}
	_, err := m.ep.Multi(ctx, ops...)
	if errors.Is(err, zookeeper.ErrNoNode) {
		if err = m.ep.EnsureContainer(ctx, dir[:len(dir)-1]); err == nil {
			_, err = m.ep.Multi(ctx, ops...)
		}
	}
	if err == nil || errors.Is(err, zookeeper.ErrUnavailable) && !errors.Is(err, zookeeper.ErrSessionLost) {
		// Made (or perhaps made, the answer lost: deleting them later is harmless).
		for _, name := range names {
			m.mine[name] = true
		}
		if err == nil {
			m.p.metrics.taken.Add(float64(len(names)))
		}
		return
	}
	m.takeOneByOne(ctx, dir, names, data)
}

// takeOneByOne makes the owner nodes of names each in its own create, in
// parallel (m.mu held), once some were taken meanwhile: the ones made, or
// perhaps made (the answer lost), are the member's.
func (m *membership) takeOneByOne(ctx context.Context, dir string, names []string, data []byte) {
	made := make([]bool, len(names))
	fns := make([]func() error, len(names))
	for i, name := range names {
		fns[i] = func() error {
			_, err := m.ep.CreateOwned(ctx, dir+name, data, true)
			// Not made: someone else holds it (the owners' watch will tell when it
			// is free). Unanswered: it may be ours; deleting it later is harmless.
			made[i] = err == nil || !errors.Is(err, zookeeper.ErrNodeExists) && !errors.Is(err, zookeeper.ErrSessionLost)
			return nil
		}
	}
	_ = zookeeper.Parallel(fns...)
	for i, ok := range made {
		if ok {
			m.mine[names[i]] = true
			m.p.metrics.taken.Inc()
		}
	}
}

// HeldNodes is the member node: deleted by another hand, the membership (and
// what it owns) is lost.
func (m *membership) HeldNodes() []string { return []string{m.node} }

// Release deletes the member's owner nodes and its member node in one
// transaction (through a suspension while the session lives), then closes its
// follower. The kit calls it once: when the lease ends or the member leaves.
func (m *membership) Release(ctx context.Context) error {
	defer m.f.Close()
	m.mu.Lock()
	m.gone = true
	mine := slices.Sorted(maps.Keys(m.mine))
	m.mine = map[string]bool{}
	m.mu.Unlock()
	m.p.unclaim(m)
	m.p.metrics.members.Dec()
	dir := m.p.groupPath(m.group) + "/owners/"
	ops := make([]zookeeper.Op, 0, len(mine)+1)
	for _, name := range mine {
		ops = append(ops, zookeeper.DeleteOp{Path: dir + name, Version: -1})
	}
	ops = append(ops, zookeeper.DeleteOp{Path: m.node, Version: -1})
	err := m.ep.Settle(ctx, func(ctx context.Context) error { return deleteAll(ctx, m.ep, ops) })
	m.p.metrics.released.Add(float64(len(mine)))
	m.f.Poke()
	return err
}

// deleteAll deletes in one transaction, or one by one when some are gone already.
func deleteAll(ctx context.Context, ep *zookeeper.Epoch, ops []zookeeper.Op) error {
	_, err := ep.Multi(ctx, ops...)
	if !errors.Is(err, zookeeper.ErrNoNode) {
		return err
	}
	fns := make([]func() error, len(ops))
	for i, op := range ops {
		fns[i] = func() error {
			err := ep.Delete(ctx, op.(zookeeper.DeleteOp).Path, -1)
			if errors.Is(err, zookeeper.ErrNoNode) {
				return nil
			}
			return err
		}
	}
	return zookeeper.Parallel(fns...)
}

// Leave removes the lease's member (and lets go of all it owns); an implicit
// lease ends with it. ErrNotHeld when the lease holds no such member.
func (p *Partitions) Leave(ctx context.Context, lease *kit.Lease, group, id string) error {
	if err := kit.CheckName("group", group); err != nil {
		return err
	}
	if err := kit.CheckName("member", id); err != nil {
		return err
	}
	return kit.Release(ctx, lease, hold(group, id))
}

// Ack tells that the lease's member has stopped work on every partition that
// version's plan does not deal it: those are let go (their owner nodes deleted,
// with the ack recorded on the member node, in one transaction) and pass on.
// version must be the member's current version or an earlier one of the same
// plan; any other is a *VersionMismatchError. ErrNotHeld when the lease holds
// no such member.
func (p *Partitions) Ack(ctx context.Context, lease *kit.Lease, group, id string, version int64) (*MemberState, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	if err := kit.CheckName("member", id); err != nil {
		return nil, err
	}
	m, ok := kit.Lookup[*membership](lease, hold(group, id))
	if !ok {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, kit.ErrNotHeld)
	}
	st, err := current(ctx, m.f)
	if err != nil {
		return nil, err
	}
	me, err := st.member(id)
	if err != nil {
		return nil, err
	}
	if version < st.PlanVersion || version > me.Version {
		return nil, &VersionMismatchError{Group: group, ID: id, Asked: version, Current: me.Version}
	}
	released, err := m.ack(ctx, me.Assigned, version)
	if err != nil {
		return nil, fmt.Errorf("ack %q of %q: %w", id, group, err)
	}
	m.f.Poke()
	st, _ = await(ctx, m.f, settleWait, func(st *State) bool {
		x, err := st.member(id)
		if err != nil {
			return true
		}
		for _, o := range x.Owned {
			if slices.Contains(released, o.Partition) {
				return false
			}
		}
		return x.Version > me.Version
	})
	if st == nil {
		return nil, kit.ErrUnavailable
	}
	out, err := st.member(id)
	if err != nil {
		return nil, err
	}
	out.Lease = ""
	return out, nil
}

// ack deletes the owner nodes m made for partitions not in assigned and
// records version on the member node, in one transaction.
func (m *membership) ack(ctx context.Context, assigned []string, version int64) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		return nil, kit.ErrLeaseEnded
	}
	var release []string
	for name := range m.mine {
		if !slices.Contains(assigned, name) {
			release = append(release, name)
		}
	}
	slices.Sort(release)
	dir := m.p.groupPath(m.group) + "/owners/"
	ops := make([]zookeeper.Op, 0, len(release)+1)
	for _, name := range release {
		ops = append(ops, zookeeper.DeleteOp{Path: dir + name, Version: -1})
	}
	data, _ := json.Marshal(memberData{Weight: m.weight, Acked: version})
	ops = append(ops, zookeeper.SetOp{Path: m.node, Data: data, Version: -1})
	_, err := m.ep.Multi(ctx, ops...)
	if errors.Is(err, zookeeper.ErrNoNode) {
		// Some owner node is gone already: delete the rest one by one, then record.
		if err = deleteAll(ctx, m.ep, ops[:len(ops)-1]); err == nil {
			_, err = m.ep.Set(ctx, m.node, data, -1)
		}
	}
	if err != nil {
		return nil, err
	}
	for _, name := range release {
		delete(m.mine, name)
	}
	m.p.metrics.released.Add(float64(len(release)))
	return release, nil
}
