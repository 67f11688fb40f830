// Package throughput holds the throughput groups: an elected member splits a
// cluster-wide limit among the live members (Allocate).
//
// Layout under <root>/throughput/<group> (see store.go): the group node holds
// the limit (persistent: it outlives every sidecar); each member is an
// ephemeral sequential node under members/, made in protected mode for a lease,
// holding its id, weight and demand; the allocation node holds the whole
// published allocation (version, leader, term, limit, every member's share) as
// one znode's data, so no reader ever sees a torn allocation.
//
// Guarantees:
//
//   - The leader is the earliest live member (the first member node in sequence
//     order), and only the sidecar whose session owns that node computes and
//     writes the allocation (Allocate over the members in join order). When the
//     leader goes (its lease or session ends), the next member's sidecar takes
//     over and recomputes.
//   - Every write is a compare-and-set on the allocation node's version, in one
//     transaction with a check that the leader's member node still exists. A
//     member node never becomes first again once a later one led, so a write by
//     a sidecar that no longer leads fails; and an allocation is never written
//     over one of a higher term (the leader node's czxid).
//   - Version increases by one with every allocation written, whoever writes.
//   - Shares sum exactly to the limit whenever the allocation has members.
//   - A group without live members is published as such (no leader, no members)
//     by any sidecar that sees it so, by the same compare-and-set.
//
// Each sidecar follows a group with one kit.Follower (one set of ZooKeeper
// watches, re-armed only when they fire; see follow.go), while it has members of
// the group or anyone streams or long-polls it.
package throughput

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Throughputs are the throughput groups of one sidecar (see the package
// documentation).
type Throughputs struct {
	s       *zookeeper.Session
	dir     string
	metrics throughputMetrics

	followers *kit.Followers[*ThroughputGroup]
}

// ThroughputGroup is a group's published allocation, as anyone can see it.
type ThroughputGroup struct {
	Group string
	Limit int64
	// Leader is the id of the member that computed the allocation, "" when the
	// group has no member.
	Leader string
	// Term is the leader member node's czxid.
	Term int64
	// Version increases with every published allocation; 0 before the first.
	Version int64
	// Members are the allocated members in join order; their shares sum to Limit.
	Members []ThroughputMember
	// Suspended is set while this sidecar's session is not connected: the state
	// is the last one seen and may be stale; once the session could have
	// expired (zookeeper.Session.InDoubt), or while there is none, Leader is
	// "" (nobody can be vouched for).
	Suspended bool
	// SuspendedSince is when the suspension began; zero when not suspended
	// (or when the session is lost or not yet made).
	SuspendedSince time.Time

	live map[string]string // id → node of the live members
}

// ThroughputMember is one allocated member.
type ThroughputMember struct {
	ID     string
	Weight int64
	// Demand is the most the member wants; -1 for unlimited.
	Demand int64
	Share  int64
	Leader bool
	node   string
}

// ThroughputShare is one member's share in an allocation.
type ThroughputShare struct {
	Group string
	ID    string
	// Lease holds the membership (set on Join).
	Lease   string
	Share   int64
	Version int64
}

// settleWait bounds how long Join, Update and SetLimit wait for the leader to
// publish an allocation that reflects them before answering with what is
// published then.
const settleWait = 5 * time.Second

// New returns the throughput groups over a session; reg (may be nil)
// receives their metrics.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Throughputs {
	m := newThroughputMetrics(reg)
	t := &Throughputs{s: s, dir: s.Dir("throughput"), metrics: m}
	t.followers = kit.NewFollowers(s, m.watched, func(group string) kit.Source[*ThroughputGroup] {
		return t.newSource(group)
	})
	return t
}

func (t *Throughputs) groupPath(group string) string { return t.dir + "/" + group }

// SetLimit sets the group's limit (persistent, creating the group) and answers
// the group once an allocation with that limit is published, or after
// settleWait with what is published then.
func (t *Throughputs) SetLimit(ctx context.Context, group string, limit int64) (*ThroughputGroup, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("limit %d: %w", limit, kit.ErrInvalidArgument)
	}
	ep, err := t.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	f, err := t.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, _ := json.Marshal(groupData{Limit: limit})
	gp := t.groupPath(group)
	err = ep.CreateIn(ctx, gp, data, zookeeper.Persistent)
	if errors.Is(err, zookeeper.ErrNodeExists) {
		_, err = ep.Set(ctx, gp, data, -1)
	}
	if err != nil {
		return nil, fmt.Errorf("set the limit of %q: %w", group, err)
	}
	await(ctx, f, settleWait, func(g *ThroughputGroup) bool { return g.Limit == limit })
	return t.Inspect(ctx, group)
}

// Inspect reads the group's allocation from ZooKeeper. A group whose members
// are all gone but whose allocation still lists some is first published empty
// (as a follower would).
func (t *Throughputs) Inspect(ctx context.Context, group string) (*ThroughputGroup, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	ep, err := t.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	snap, err := t.inspect(ctx, ep, group)
	if err != nil {
		return nil, err
	}
	if next := emptyAllocation(snap.exists, snap.limit, snap.line); next != nil && !sameAllocation(snap.alloc, next) {
		if _, err := writeAllocation(ctx, ep, t.groupPath(group)+"/allocation", snap.alloc, snap.allocVer, next); err == nil {
			t.metrics.allocations.Inc()
			snap.alloc = next
		}
	}
	return view(group, snap.limit, snap.line, snap.alloc), nil
}

// List returns the names of the throughput groups that have a node, sorted. It
// reads one directory: for listings and status pages, not for a hot path.
func (t *Throughputs) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, t.s, t.dir)
}

// emptyAllocation is the allocation to publish for a group that exists and has
// no live member; nil otherwise.
func emptyAllocation(exists bool, limit int64, line []member) *allocationData {
	if !exists || len(line) > 0 {
		return nil
	}
	return compute(limit, nil)
}

// view turns an allocation and the live members into what callers see.
func view(group string, limit int64, line []member, a *allocationData) *ThroughputGroup {
	g := &ThroughputGroup{Group: group, Limit: limit, Members: []ThroughputMember{}, live: make(map[string]string, len(line))}
	for _, m := range line {
		if _, dup := g.live[m.data.ID]; !dup {
			g.live[m.data.ID] = m.node
		}
	}
	if a == nil {
		return g
	}
	g.Limit, g.Leader, g.Term, g.Version = a.Limit, a.Leader, a.Term, a.Version
	for _, m := range a.Members {
		g.Members = append(g.Members, ThroughputMember{
			ID: m.ID, Weight: m.Weight, Demand: demandOf(m.Demand), Share: m.Share,
			Leader: m.Node == a.LeaderNode, node: m.Node,
		})
	}
	return g
}

// Live reports whether a live member has this id.
func (g *ThroughputGroup) Live(id string) bool {
	_, ok := g.live[id]
	return ok
}

// shareOf returns the member's share: its allocated share, 0 while it is live
// but not allocated yet; ok is false when no live member has that id.
func (g *ThroughputGroup) shareOf(id string) (*ThroughputShare, bool) {
	node, ok := g.live[id]
	if !ok {
		return nil, false
	}
	sh := &ThroughputShare{Group: g.Group, ID: id, Version: g.Version}
	for _, m := range g.Members {
		if m.node == node {
			sh.Share = m.Share
		}
	}
	return sh, true
}

// allocated reports whether the allocation includes node with this weight and demand.
func (g *ThroughputGroup) allocated(node string, weight, demand int64) bool {
	for _, m := range g.Members {
		if m.node == node {
			return m.Weight == weight && m.Demand == demand
		}
	}
	return false
}

type throughputMetrics struct {
	members     prometheus.Gauge
	allocations prometheus.Counter
	conflicts   prometheus.Counter
	led         prometheus.Gauge
	watched     prometheus.Gauge
}

func newThroughputMetrics(reg prometheus.Registerer) throughputMetrics {
	f := promauto.With(reg)
	return throughputMetrics{
		members: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_throughput_members", Help: "Throughput-group members joined by leases of this sidecar.",
		}),
		allocations: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_throughput_allocations_total", Help: "Allocations published by this sidecar (as a group's leader, or for a group left without members).",
		}),
		conflicts: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_throughput_allocation_conflicts_total",
			Help: "Allocation writes refused because another writer came first or the writer no longer led (compare-and-set failed); the writer reads again.",
		}),
		led: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_throughput_groups_led", Help: "Throughput groups whose leader (computing member) is on this sidecar.",
		}),
		watched: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_throughput_watched", Help: "Throughput groups this sidecar follows with one set of ZooKeeper watches each.",
		}),
	}
}
