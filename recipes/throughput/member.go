package throughput

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// MemberKind is the kind of a throughput-group member's hold on its lease
// (kit.Hold), named "<group>/<member id>".
const MemberKind = "throughput"

const throughputKind = MemberKind

func memberHold(group, id string) kit.Hold {
	return kit.Hold{Kind: throughputKind, Name: group + "/" + id}
}

// membership is what a lease holds for one member: its node, made under the
// lease's session, and a follower of its group kept open while it is held (so
// that this sidecar leads the group when the member is first).
type membership struct {
	t         *Throughputs
	group, id string
	parent    string // the group's members node
	guid      string // of the member node's protected create
	node      string // full path
	ep        *zookeeper.Epoch
	f         *ThroughputFollower

	mu     sync.Mutex // serialises Update's writes
	weight int64
	demand *int64
}

// HeldNodes is the member node: deleted by another hand, the membership and
// its share are lost.
func (m *membership) HeldNodes() []string { return []string{m.node} }

// Release deletes the member node (retrying through a suspension while the
// session lives) and, unless the session is lost, waits up to settleWait (and
// while ctx lives) for this sidecar's follower to see the member gone, before
// closing that follower: the follower publishes the group empty if this was its
// last member. The kit calls it once, when the lease ends or the member leaves.
func (m *membership) Release(ctx context.Context) error {
	defer m.f.Close()
	err := m.ep.DeleteProtected(ctx, m.parent, m.guid, m.node)
	m.t.metrics.members.Dec()
	if !m.ep.IsLost() {
		base := path.Base(m.node)
		await(ctx, m.f, settleWait, func(g *ThroughputGroup) bool { return g.live[m.id] != base })
	}
	return err
}

// Join enrols member id with weight in the group for lease, at the back of the
// line, and answers its share once the leader has published an allocation that
// includes it (or after settleWait, with share 0). ErrMemberExists when a live
// member has that id. The member leaves when the lease ends.
func (t *Throughputs) Join(ctx context.Context, lease *kit.Lease, group, id string, weight int64) (*ThroughputShare, error) {
	m, err := kit.JoinWeighted(ctx, lease, memberHold(group, id), group, id, weight, MaxWeight, ErrMemberExists, func(ctx context.Context, ep *zookeeper.Epoch) (*membership, error) {
		return t.join(ctx, ep, group, id, weight)
	})
	if err != nil {
		return nil, err
	}
	base := path.Base(m.node)
	g, _ := await(ctx, m.f, settleWait, func(g *ThroughputGroup) bool {
		return g.allocated(base, weight, -1)
	})
	sh := &ThroughputShare{Group: group, ID: id, Lease: lease.ID}
	if g != nil {
		sh.Version = g.Version
		for _, x := range g.Members {
			if x.node == base {
				sh.Share = x.Share
			}
		}
	}
	return sh, nil
}

// join makes the member node under ep, unless a live member has id already,
// with a follower of the group open first (so that it reads the new member).
func (t *Throughputs) join(ctx context.Context, ep *zookeeper.Epoch, group, id string, weight int64) (*membership, error) {
	snap, err := t.inspect(ctx, ep, group)
	if err != nil {
		return nil, err
	}
	for _, m := range snap.line {
		if m.data.ID == id {
			return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberExists)
		}
	}
	f, err := t.Follow(group)
	if err != nil {
		return nil, err
	}
	mp := t.groupPath(group) + "/members"
	if err := ep.EnsurePersistent(ctx, mp); err != nil {
		f.Close()
		return nil, err
	}
	data, _ := json.Marshal(memberData{ID: id, Weight: weight})
	made, err := ep.CreateProtected(ctx, mp, "member-", data, false)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("join %q: %w", group, err)
	}
	t.metrics.members.Inc() // Release counts it out, also when the grant fails
	return &membership{
		t: t, group: group, id: id, parent: mp, guid: made.GUID, node: made.Path,
		ep: ep, f: f, weight: weight,
	}, nil
}

// Adopt re-creates lease's membership h from its saved member node after a
// restart that resumed the session (a kit.Adopter): the node must be a
// protected create under the group's members, owned by the session and holding
// member h's id; its weight and demand are read from it, as Update left them.
// The group's follower is opened as Join opens it, so this sidecar leads the
// group again while its node is first: with the line unchanged, the leader
// computes the allocation already published and writes nothing, so the leader,
// its term, the version and every share stay as they were.
func (t *Throughputs) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	group, id, _ := strings.Cut(h.Name, "/")
	if kit.CheckName("group", group) != nil || kit.CheckName("member", id) != nil {
		return nil, fmt.Errorf("throughput member %q: not <group>/<member id>", h.Name)
	}
	mp := t.groupPath(group) + "/members"
	created, data, _, err := kit.ProtectedNode(ctx, lease, h, mp, fmt.Sprintf("throughput member %q", h.Name))
	if err != nil {
		return nil, err
	}
	node, guid := created.Path, created.GUID
	var md memberData
	if err := json.Unmarshal(data, &md); err != nil || md.ID != id {
		return nil, fmt.Errorf("throughput member %q: node %s does not hold member %q", h.Name, node, id)
	}
	md = decodeMember(path.Base(node), data)
	f, err := t.Follow(group)
	if err != nil {
		return nil, err
	}
	t.metrics.members.Inc()
	return &membership{
		t: t, group: group, id: id, parent: mp, guid: guid, node: node,
		ep: lease.Epoch(), f: f, weight: md.Weight, demand: md.Demand,
	}, nil
}

// Update sets the lease's member's weight (nil keeps it) and demand (nil:
// unlimited) and answers its share once an allocation reflecting them is
// published (or after settleWait). ErrNotHeld when the lease holds no such member.
func (t *Throughputs) Update(ctx context.Context, lease *kit.Lease, group, id string, weight, demand *int64) (*ThroughputShare, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	if err := kit.CheckName("member", id); err != nil {
		return nil, err
	}
	if weight != nil && (*weight < 1 || *weight > MaxWeight) {
		return nil, fmt.Errorf("weight %d not in 1..%d: %w", *weight, MaxWeight, kit.ErrInvalidArgument)
	}
	if demand != nil && *demand < 0 {
		return nil, fmt.Errorf("demand %d is negative: %w", *demand, kit.ErrInvalidArgument)
	}
	m, ok := kit.Lookup[*membership](lease, memberHold(group, id))
	if !ok {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, kit.ErrNotHeld)
	}
	w, err := m.set(ctx, weight, demand)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("update %q of %q: %w", id, group, err)
	}
	f, err := t.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, _ := await(ctx, f, settleWait, func(g *ThroughputGroup) bool {
		return g.allocated(path.Base(m.node), w, demandOf(demand))
	})
	sh := &ThroughputShare{Group: group, ID: id, Lease: lease.ID}
	if g != nil {
		if s, ok := g.shareOf(id); ok {
			sh.Share, sh.Version = s.Share, s.Version
		}
	}
	return sh, nil
}

// set writes the member's data with weight (nil keeps it) and demand, and
// returns the weight written.
func (m *membership) set(ctx context.Context, weight, demand *int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w := m.weight
	if weight != nil {
		w = *weight
	}
	data, _ := json.Marshal(memberData{ID: m.id, Weight: w, Demand: demand})
	if _, err := m.ep.Set(ctx, m.node, data, -1); err != nil {
		return w, err
	}
	m.weight, m.demand = w, demand
	return w, nil
}

// Leave removes the lease's member from the group; an implicit lease ends with
// it (not when the member node could not be deleted). ErrNotHeld when the lease
// holds no such member.
func (t *Throughputs) Leave(ctx context.Context, lease *kit.Lease, group, id string) error {
	if err := kit.CheckName("group", group); err != nil {
		return err
	}
	if err := kit.CheckName("member", id); err != nil {
		return err
	}
	m, err := kit.Take[*membership](lease, memberHold(group, id))
	if err != nil {
		return err
	}
	if err := m.Release(ctx); err != nil {
		return fmt.Errorf("leave %q: %w", group, err)
	}
	lease.Released()
	return nil
}

// Member answers a live member's share as ZooKeeper has it now (0 while it is
// not allocated yet); ErrMemberNotFound when no live member has that id.
func (t *Throughputs) Member(ctx context.Context, group, id string) (*ThroughputShare, error) {
	if err := kit.CheckName("member", id); err != nil {
		return nil, err
	}
	g, err := t.Inspect(ctx, group)
	if err != nil {
		return nil, err
	}
	sh, ok := g.shareOf(id)
	if !ok {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberNotFound)
	}
	return sh, nil
}

// AwaitMember answers the member's share once the published version differs
// from version, or when wait ends (then as Member does). ErrMemberNotFound when
// no live member has that id when it answers.
func (t *Throughputs) AwaitMember(ctx context.Context, group, id string, version int64, wait time.Duration) (*ThroughputShare, error) {
	if err := kit.CheckName("member", id); err != nil {
		return nil, err
	}
	f, err := t.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, ok := await(ctx, f, wait, func(g *ThroughputGroup) bool { return g.Version != version || !g.Live(id) })
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if !ok {
		// Unchanged within wait: answer as ZooKeeper has it now.
		return t.Member(ctx, group, id)
	}
	sh, ok := g.shareOf(id)
	if !ok {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberNotFound)
	}
	return sh, nil
}
