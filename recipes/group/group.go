// Package group holds the membership groups: who is alive right now, each live
// member with a value, and a live view of the group.
//
// Layout, Curator GroupMember's: under <root>/groups/<group> (a container node),
// each member is the ephemeral node <id> whose data is the member's value, made
// under this sidecar's session for a lease. A Curator GroupMember (or anything
// that places such nodes) and a sidecar member see each other.
//
// Guarantees:
//
//   - A member lives while its lease lives: it is deleted when the lease is
//     revoked or expires or the member leaves (at once), and by ZooKeeper when
//     the sidecar's session ends (after the session timeout).
//   - Members are listed in join order (their node's creation zxid).
//   - A group's Version is the highest zxid among its members' nodes (creation
//     and last change) and the group node's last change of children: it strictly
//     increases with every join, leave and change of value, is the same on every
//     sidecar, and costs no write. A group without a node (none joined yet, or
//     emptied and its container node removed by ZooKeeper) is at version 0.
package group

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Groups are the membership groups of one sidecar.
type Groups struct {
	s       *zookeeper.Session
	dir     string
	metrics groupMetrics

	followers *kit.Followers[*State]

	mu    sync.Mutex
	local map[string]bool // group/id of the members this sidecar holds or is making
}

// State is a group as seen at one moment.
type State struct {
	Group   string
	Version int64
	// Members are the live members in join order.
	Members []Member
	// Suspended is set while this sidecar's session is not connected. During
	// the first part of a suspension the state is the last one read; once the
	// session could have expired (zookeeper.Session.InDoubt), or while there
	// is none, Members is empty: nobody can be vouched for.
	Suspended bool
	// SuspendedSince is when the suspension began; zero when not suspended
	// (or when the session is lost or not yet made).
	SuspendedSince time.Time
}

// Member is one live member.
type Member struct {
	ID    string
	Value string
	Since time.Time
	czxid int64
	mzxid int64
}

// Joined is what a join answers.
type Joined struct {
	Group, ID, Lease string
}

// New returns the membership groups over a session; reg (may be nil)
// receives their metrics.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Groups {
	g := &Groups{s: s, dir: s.Dir("groups"), metrics: newGroupMetrics(reg), local: map[string]bool{}}
	g.followers = kit.NewFollowers(s, g.metrics.watched, func(name string) kit.Source[*State] {
		return newSource(g, name)
	})
	return g
}

func (g *Groups) groupPath(group string) string { return g.dir + "/" + group }

// MemberKind is the kind of a member's hold on its lease (kit.Hold); the
// hold's name is <group>/<id>.
const MemberKind = "group"

const kind = MemberKind

func hold(group, id string) kit.Hold { return kit.Hold{Kind: kind, Name: group + "/" + id} }

func checkNames(group, id string) error {
	if err := kit.CheckName("group", group); err != nil {
		return err
	}
	return kit.CheckName("member", id)
}

// membership is a lease's member: its node under the lease's session.
type membership struct {
	g         *Groups
	group, id string
	node      string
	ep        *zookeeper.Epoch
}

// HeldNodes is the member node: deleted by another hand, the membership is
// lost.
func (m *membership) HeldNodes() []string { return []string{m.node} }

// Release deletes the member node (through a suspension, while the session
// lives). The kit calls it once: when the lease ends, the member leaves or its
// node is lost.
func (m *membership) Release(ctx context.Context) error {
	defer m.g.unclaim(m.group, m.id)
	m.g.metrics.members.Dec()
	err := m.ep.Settle(ctx, func(ctx context.Context) error {
		err := m.ep.Delete(ctx, m.node, -1)
		if errors.Is(err, zookeeper.ErrNoNode) {
			return nil
		}
		return err
	})
	if f, ferr := m.g.Follow(m.group); ferr == nil {
		f.Poke()
		f.Close()
	}
	return err
}

// Adopt makes the member h of lease its own again after a restart (a
// kit.Adopter): its one saved node is the member node <group>/<id>, an
// ephemeral node of the lease's (resumed) session, and no lease of this
// sidecar has that member yet. The node, its value and its join order are
// unchanged: another sidecar sees no leave and no join.
func (g *Groups) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	group, id, _ := strings.Cut(h.Name, "/")
	if err := checkNames(group, id); err != nil {
		return nil, fmt.Errorf("member %q: %w", h.Name, err)
	}
	node := g.groupPath(group) + "/" + id
	if len(h.Nodes) != 1 || h.Nodes[0] != node {
		return nil, fmt.Errorf("member %q of group %q: saved nodes %v are not its node %s", id, group, h.Nodes, node)
	}
	if _, _, err := kit.OwnedNode(ctx, lease, node); err != nil {
		return nil, fmt.Errorf("member %q of group %q: %w", id, group, err)
	}
	if !g.claim(group, id) {
		return nil, fmt.Errorf("member %q of group %q: %w", id, group, ErrMemberExists)
	}
	g.metrics.members.Inc()
	return &membership{g: g, group: group, id: id, node: node, ep: lease.Epoch()}, nil
}

// claim reserves group/id on this sidecar: false when one of its leases holds
// (or is making) that member already.
func (g *Groups) claim(group, id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	k := group + "/" + id
	if g.local[k] {
		return false
	}
	g.local[k] = true
	return true
}

func (g *Groups) unclaim(group, id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.local, group+"/"+id)
}

// Join makes member id of group with value for lease. ErrMemberExists when the
// group has a live member with that id. The member leaves when the lease ends.
func (g *Groups) Join(ctx context.Context, lease *kit.Lease, group, id, value string) (*Joined, error) {
	if err := checkNames(group, id); err != nil {
		return nil, err
	}
	_, found, err := kit.Acquire(ctx, lease, hold(group, id), func(ctx context.Context, ep *zookeeper.Epoch) (*membership, error) {
		if !g.claim(group, id) {
			return nil, fmt.Errorf("member %q of group %q: %w", id, group, ErrMemberExists)
		}
		node := g.groupPath(group) + "/" + id
		// CreateOwned adopts a node of this session only after a lost answer or
		// when its data is ours: claim makes sure no other lease of this sidecar
		// has that member.
		if _, err := ep.CreateOwned(ctx, node, []byte(value), true); err != nil {
			g.unclaim(group, id)
			if errors.Is(err, zookeeper.ErrNodeExists) {
				return nil, fmt.Errorf("member %q of group %q: %w", id, group, ErrMemberExists)
			}
			return nil, fmt.Errorf("join %q: %w", group, err)
		}
		g.metrics.members.Inc()
		return &membership{g: g, group: group, id: id, node: node, ep: ep}, nil
	})
	if err != nil {
		return nil, err
	}
	if found {
		return nil, fmt.Errorf("member %q of group %q: %w", id, group, ErrMemberExists)
	}
	if f, err := g.Follow(group); err == nil {
		f.Poke()
		f.Close()
	}
	return &Joined{Group: group, ID: id, Lease: lease.ID}, nil
}

// SetValue sets the value of the lease's member. ErrNotHeld when the lease
// holds no such member; ErrMemberNotFound when its node is gone and the lease
// has not noticed yet (once it has, the member is one of the lease's lost
// holds, and no longer held: ErrNotHeld).
func (g *Groups) SetValue(ctx context.Context, lease *kit.Lease, group, id, value string) error {
	if err := checkNames(group, id); err != nil {
		return err
	}
	m, ok := kit.Lookup[*membership](lease, hold(group, id))
	if !ok {
		return fmt.Errorf("member %q of group %q: %w", id, group, kit.ErrNotHeld)
	}
	_, err := m.ep.SetChecked(ctx, m.node, []byte(value), -1) // a lost answer is checked
	if errors.Is(err, zookeeper.ErrNoNode) {
		return fmt.Errorf("member %q of group %q: %w", id, group, ErrMemberNotFound)
	}
	return err
}

// Leave removes the lease's member; an implicit lease ends with it.
// ErrNotHeld when the lease holds no such member.
func (g *Groups) Leave(ctx context.Context, lease *kit.Lease, group, id string) error {
	if err := checkNames(group, id); err != nil {
		return err
	}
	return kit.Release(ctx, lease, hold(group, id))
}

// Inspect reads a group from ZooKeeper (no watches): a group without a node
// has no members and version 0.
func (g *Groups) Inspect(ctx context.Context, group string) (*State, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	return newSource(g, group).Inspect(ctx, g.s)
}

// List returns the names of the groups that have a node, sorted.
func (g *Groups) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, g.s, g.dir)
}

// Follower follows one group: one set of watches per sidecar, however many
// streams and long-polls.
type Follower = kit.Follower[*State]

// Follow starts following group; Close stops.
func (g *Groups) Follow(group string) (*Follower, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	return g.followers.Follow(group), nil
}

// Await answers the group once its version differs from version, or when wait
// ends (then as ZooKeeper has it: Inspect, so ErrUnavailable while the session
// is not connected; a Suspended state is never the answer), or ctx's cause
// once ctx ends.
func (g *Groups) Await(ctx context.Context, group string, version int64, wait time.Duration) (*State, error) {
	f, err := g.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, ok := f.Await(ctx, wait, func(s *State) bool { return !s.Suspended && s.Version != version })
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if !ok {
		return g.Inspect(ctx, group)
	}
	return st, nil
}

func memberOf(node string, data []byte, st *zookeeper.Stat) Member {
	return Member{ID: node, Value: string(data), Since: time.UnixMilli(st.Ctime).UTC(), czxid: st.Czxid, mzxid: st.Mzxid}
}

// view orders members by join (creation zxid) and computes the version.
func view(group string, pzxid int64, members map[string]Member) *State {
	st := &State{Group: group, Version: pzxid, Members: make([]Member, 0, len(members))}
	for _, m := range members {
		if !kit.ValidName(m.ID) {
			continue // not a member node (a protected-create leftover, say)
		}
		st.Members = append(st.Members, m)
		st.Version = max(st.Version, m.mzxid)
	}
	sort.Slice(st.Members, func(i, j int) bool { return st.Members[i].czxid < st.Members[j].czxid })
	return st
}

type groupMetrics struct {
	members prometheus.Gauge
	watched prometheus.Gauge
}

func newGroupMetrics(reg prometheus.Registerer) groupMetrics {
	f := promauto.With(reg)
	return groupMetrics{
		members: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_group_members", Help: "Membership-group members joined by leases of this sidecar.",
		}),
		watched: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_groups_watched", Help: "Membership groups this sidecar follows with one set of ZooKeeper watches each.",
		}),
	}
}
