package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
)

// Throughputs are throughput groups: an elected member splits a cluster-wide limit
// among the live members.
//
// Layout under <root>/throughput/<group> (see throughput_store.go): the group
// node holds the limit (persistent: it outlives every sidecar); each member is
// an ephemeral sequential node under members/, made in protected mode for a
// lease, holding its id, weight and demand; the allocation node holds the whole
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
// Each sidecar follows a group with one watcher (one set of ZooKeeper watches,
// re-armed only when they fire), while it has members of the group or anyone
// streams or long-polls it.
type Throughputs struct {
	s       *Session
	dir     string
	metrics throughputMetrics

	watches *sharedWatches[*groupWatch]
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
	// is the last one seen and may be stale.
	Suspended bool

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

// Sentinel errors of the throughput recipe.
var (
	// ErrMemberExists means a live member already has that id in that group.
	ErrMemberExists = errors.New("member exists")
	// ErrMemberNotFound means no live member has that id in that group.
	ErrMemberNotFound = errors.New("member not found")
)

const throughputKind = "throughput"

// settleWait bounds how long Join, Update and SetLimit wait for the leader to
// publish an allocation that reflects them before answering with what is
// published then.
const settleWait = 5 * time.Second

// NewThroughputs returns the throughput-group recipe over a session.
func NewThroughputs(s *Session, reg prometheus.Registerer) *Throughputs {
	m := newThroughputMetrics(reg)
	return &Throughputs{
		s: s, dir: path.Join(s.Root(), "throughput"), metrics: m,
		watches: newSharedWatches[*groupWatch](m.watched),
	}
}

func (t *Throughputs) groupPath(group string) string { return t.dir + "/" + group }

func memberHold(group, id string) Hold { return Hold{Kind: throughputKind, Name: group + "/" + id} }

// membership is what a lease holds for one member.
type membership struct {
	group, id string
	node      string // full path
	ep        *epoch

	mu     sync.Mutex
	weight int64
	demand *int64
}

// SetLimit sets the group's limit (persistent, creating the group) and answers
// the group once an allocation with that limit is published, or after
// settleWait with what is published then.
func (t *Throughputs) SetLimit(ctx context.Context, group string, limit int64) (*ThroughputGroup, error) {
	if err := CheckName("group", group); err != nil {
		return nil, err
	}
	if limit < 0 {
		return nil, fmt.Errorf("limit %d: %w", limit, ErrInvalidArgument)
	}
	ep, err := t.s.current()
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
	err = createIn(ctx, ep, gp, data, zk.FlagPersistent)
	if errors.Is(err, zk.ErrNodeExists) {
		err = ep.call(ctx, func(c *zk.Conn) error {
			_, err := c.Set(gp, data, -1)
			return err
		})
	}
	if err != nil {
		return nil, fmt.Errorf("set the limit of %q: %w", group, err)
	}
	f.await(ctx, settleWait, func(g *ThroughputGroup) bool { return g.Limit == limit })
	return t.Inspect(ctx, group)
}

// Inspect reads the group's allocation from ZooKeeper. A group whose members
// are all gone but whose allocation still lists some is first published empty
// (as a watcher would).
func (t *Throughputs) Inspect(ctx context.Context, group string) (*ThroughputGroup, error) {
	if err := CheckName("group", group); err != nil {
		return nil, err
	}
	ep, err := t.s.current()
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

// Join enrols member id with weight in the group for lease, at the back of the
// line, and answers its share once the leader has published an allocation that
// includes it (or after settleWait, with share 0). ErrMemberExists when a live
// member has that id. The member leaves when the lease ends.
func (t *Throughputs) Join(ctx context.Context, lease *Lease, group, id string, weight int64) (*ThroughputShare, error) {
	if err := CheckName("group", group); err != nil {
		return nil, err
	}
	if err := CheckName("member", id); err != nil {
		return nil, err
	}
	if weight < 1 || weight > MaxWeight {
		return nil, fmt.Errorf("weight %d not in 1..%d: %w", weight, MaxWeight, ErrInvalidArgument)
	}
	h := memberHold(group, id)
	if _, ok, err := lease.reserve(h); err != nil {
		return nil, err
	} else if ok {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrMemberExists)
	}
	sh, err := t.join(ctx, lease, h, group, id, weight)
	if err != nil {
		lease.unreserve(h)
		return nil, err
	}
	return sh, nil
}

func (t *Throughputs) join(ctx context.Context, lease *Lease, h Hold, group, id string, weight int64) (*ThroughputShare, error) {
	ep := lease.ep
	if err := lease.connected(); err != nil {
		return nil, fmt.Errorf("throughput group %q: %w", group, err)
	}
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
	gp := t.groupPath(group)
	if err := ensurePersistent(ctx, ep, gp+"/members"); err != nil {
		f.Close()
		return nil, err
	}
	data, _ := json.Marshal(memberData{ID: id, Weight: weight})
	guid := newGUID()
	made, err := createProtected(ctx, ep, gp+"/members", guid, "member-", data, false)
	node := made.Path
	if err != nil {
		cleanupProtected(ep, gp+"/members", guid, "")
		f.Close()
		return nil, fmt.Errorf("join %q: %w", group, err)
	}
	m := &membership{group: group, id: id, node: node, ep: ep, weight: weight}
	release := func(ctx context.Context) error {
		defer f.Close()
		err := deleteProtected(ctx, ep, gp+"/members", guid, node)
		t.metrics.members.Dec()
		if !ep.isLost() {
			// Let this sidecar's watcher see the member gone before it may stop:
			// it publishes the group empty if this was the last member.
			f.await(ctx, settleWait, func(g *ThroughputGroup) bool { return g.live[id] != path.Base(node) })
		}
		return err
	}
	if err := lease.grant(h, m, release); err != nil {
		cleanupProtected(ep, gp+"/members", guid, node)
		f.Close()
		return nil, err
	}
	t.metrics.members.Inc()
	g, _ := f.await(ctx, settleWait, func(g *ThroughputGroup) bool {
		return g.allocated(path.Base(node), weight, -1)
	})
	sh := &ThroughputShare{Group: group, ID: id, Lease: lease.ID}
	if g != nil {
		sh.Version = g.Version
		for _, x := range g.Members {
			if x.node == path.Base(node) {
				sh.Share = x.Share
			}
		}
	}
	return sh, nil
}

// Update sets the lease's member's weight (nil keeps it) and demand (nil:
// unlimited) and answers its share once an allocation reflecting them is
// published (or after settleWait). ErrNotHeld when the lease holds no such member.
func (t *Throughputs) Update(ctx context.Context, lease *Lease, group, id string, weight, demand *int64) (*ThroughputShare, error) {
	if err := CheckName("group", group); err != nil {
		return nil, err
	}
	if err := CheckName("member", id); err != nil {
		return nil, err
	}
	if weight != nil && (*weight < 1 || *weight > MaxWeight) {
		return nil, fmt.Errorf("weight %d not in 1..%d: %w", *weight, MaxWeight, ErrInvalidArgument)
	}
	if demand != nil && *demand < 0 {
		return nil, fmt.Errorf("demand %d is negative: %w", *demand, ErrInvalidArgument)
	}
	v, ok := lease.value(memberHold(group, id))
	if !ok {
		return nil, fmt.Errorf("member %q of %q: %w", id, group, ErrNotHeld)
	}
	m := v.(*membership)
	m.mu.Lock()
	w := m.weight
	if weight != nil {
		w = *weight
	}
	data, _ := json.Marshal(memberData{ID: id, Weight: w, Demand: demand})
	err := m.ep.call(ctx, func(c *zk.Conn) error {
		_, err := c.Set(m.node, data, -1)
		return err
	})
	if err == nil {
		m.weight, m.demand = w, demand
	}
	m.mu.Unlock()
	if errors.Is(err, zk.ErrNoNode) {
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
	g, _ := f.await(ctx, settleWait, func(g *ThroughputGroup) bool {
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

// Leave removes the lease's member from the group; an implicit lease ends with
// it. ErrNotHeld when the lease holds no such member.
func (t *Throughputs) Leave(ctx context.Context, lease *Lease, group, id string) error {
	if err := CheckName("group", group); err != nil {
		return err
	}
	if err := CheckName("member", id); err != nil {
		return err
	}
	held, err := lease.take(memberHold(group, id))
	if err != nil {
		return err
	}
	if err := held.release(ctx); err != nil {
		return fmt.Errorf("leave %q: %w", group, err)
	}
	lease.released()
	return nil
}

// Member answers a live member's share as ZooKeeper has it now (0 while it is
// not allocated yet); ErrMemberNotFound when no live member has that id.
func (t *Throughputs) Member(ctx context.Context, group, id string) (*ThroughputShare, error) {
	if err := CheckName("member", id); err != nil {
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
	if err := CheckName("member", id); err != nil {
		return nil, err
	}
	f, err := t.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	g, ok := f.await(ctx, wait, func(g *ThroughputGroup) bool { return g.Version != version || !g.Live(id) })
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

type throughputMetrics struct {
	members     prometheus.Gauge
	allocations prometheus.Counter
	conflicts   prometheus.Counter
	led         prometheus.Gauge
	watched     prometheus.Gauge
}

func newThroughputMetrics(reg prometheus.Registerer) throughputMetrics {
	m := throughputMetrics{
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_throughput_members", Help: "Throughput-group members joined by leases of this sidecar.",
		}),
		allocations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_throughput_allocations_total", Help: "Allocations published by this sidecar (as a group's leader, or for a group left without members).",
		}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_throughput_allocation_conflicts_total",
			Help: "Allocation writes refused because another writer came first or the writer no longer led (compare-and-set failed); the writer reads again.",
		}),
		led: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_throughput_groups_led", Help: "Throughput groups whose leader (computing member) is on this sidecar.",
		}),
		watched: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_throughput_watched", Help: "Throughput groups this sidecar follows with one set of ZooKeeper watches each.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.members, m.allocations, m.conflicts, m.led, m.watched)
	}
	return m
}
