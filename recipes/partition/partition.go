// Package partition holds the partition groups: the group's leader (its
// earliest live member) deals a set of partitions among the live members
// (Plan), and members take what is dealt to them only once its previous owner
// let it go, so no two members ever own one partition at once.
//
// Layout: see layout.go. Guarantees:
//
//   - The plan is computed by the sidecar whose session holds the earliest
//     member node and written as one znode (compare-and-set on its version, in
//     one transaction with a check that the leader's node exists), so no reader
//     sees a torn plan and a member that no longer leads cannot write.
//   - A partition is owned through the ephemeral node owners/<partition>, made
//     by the owning member's sidecar: one node, one owner. Its czxid is the
//     owner's fencing token, higher for every new owner.
//   - A member takes (creates the owner node of) every partition the plan deals
//     it as soon as that node is free: its sidecar watches the owners. It lets
//     one go only when it acks a version whose plan does not deal it that
//     partition, when it leaves or its lease ends (its nodes are deleted with
//     its member node in one transaction), or when its sidecar's session ends
//     (ZooKeeper deletes them).
//   - While its sidecar's session is not connected, a member is shown owning
//     nothing and its long-poll answers 503: it must stop work until told again.
//
// Each sidecar follows a group with one kit.Follower (watches on the set, the
// members, the plan and the owners), while it has members there or anyone
// reads, long-polls or streams it.
package partition

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Partitions are the partition groups of one sidecar.
type Partitions struct {
	s       *zookeeper.Session
	dir     string
	metrics metrics

	followers *kit.Followers[*State]

	mu    sync.Mutex
	local map[string]map[string]*membership // group → id → member held by a lease of this sidecar
}

// State is a group as seen at one moment.
type State struct {
	Group   string
	Version int64
	// PlanVersion is the zxid of the plan's last write (0: none yet).
	PlanVersion int64
	// Leader is the earliest live member's id ("" without members).
	Leader     string
	Partitions []string
	// Members are the live members in join order.
	Members []MemberState
	// Moving are the partitions whose owner is not the member the plan deals
	// them to (free, or still held by the previous owner).
	Moving []Move
	// Suspended is set while this sidecar's session is not connected. During
	// the first part of a suspension the state is the last one read; once the
	// session could have expired (zookeeper.Session.InDoubt), or while there
	// is none, nothing is shown owned and no member leads.
	Suspended bool
	// SuspendedSince is when the suspension began; zero when not suspended
	// (or when the session is lost or not yet made).
	SuspendedSince time.Time

	czxid map[string]int64 // member id → member node's czxid
	// doubted: nothing of this state is vouched for (the session could have
	// expired, or there is none); a suspended state that is not doubted is
	// the last one read, whose nodes still stand.
	doubted bool
}

// MemberState is one member's view.
type MemberState struct {
	Group, ID string
	Weight    int64
	// Assigned are the partitions the plan deals the member, in set order.
	Assigned []string
	// Owned are the partitions it owns (may act on), in set order.
	Owned []Owned
	// Version is the member's version: it changes whenever its plan or what it
	// owns does; ack it to let go of what the plan no longer deals it.
	Version int64
	// Lease holds the member (on Join).
	Lease string
}

// Owned is one owned partition with its fencing token.
type Owned struct {
	Partition    string
	FencingToken int64
}

// Move is a partition on its way: Owner ("" when free) is not Assigned.
type Move struct {
	Partition, Owner, Assigned string
}

// settleWait bounds how long Join and SetPartitions wait for a plan that
// reflects them before answering with what is published then.
const settleWait = 5 * time.Second

// New returns the partition groups over a session; reg (may be nil) receives
// their metrics.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Partitions {
	p := &Partitions{s: s, dir: s.Dir("partitions"), metrics: newMetrics(reg), local: map[string]map[string]*membership{}}
	p.followers = kit.NewFollowers(s, p.metrics.watched, func(group string) kit.Source[*State] {
		return p.newSource(group)
	})
	return p
}

func (p *Partitions) groupPath(group string) string { return p.dir + "/" + group }

// SetPartitions sets the group's partition set (persistent, creating the
// group) and answers the group once a plan over it is published (or after
// settleWait).
func (p *Partitions) SetPartitions(ctx context.Context, group string, set Set) (*State, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	if err := CheckSet(set); err != nil {
		return nil, err
	}
	ep, err := p.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	f, err := p.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, _ := json.Marshal(set)
	gp := p.groupPath(group)
	err = ep.CreateIn(ctx, gp, data, zookeeper.Persistent)
	if errors.Is(err, zookeeper.ErrNodeExists) {
		_, err = ep.Set(ctx, gp, data, -1)
	}
	if err != nil {
		return nil, fmt.Errorf("set the partitions of %q: %w", group, err)
	}
	f.Poke()
	names := set.List()
	st, _ := await(ctx, f, settleWait, func(st *State) bool {
		return equalStrings(st.Partitions, names) && (len(st.Members) == 0 || st.PlanVersion > 0 && len(st.Moving) == 0)
	})
	if st == nil {
		return nil, kit.ErrUnavailable
	}
	return st, nil
}

// Inspect answers the group as this sidecar's follower of it has it (starting
// one, and waiting for its first read, when none runs).
func (p *Partitions) Inspect(ctx context.Context, group string) (*State, error) {
	f, err := p.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return current(ctx, f)
}

// current is the follower's state once read under a connected session.
func current(ctx context.Context, f *Follower) (*State, error) {
	st, ok := await(ctx, f, 10*time.Second, func(*State) bool { return true })
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if !ok {
		return nil, fmt.Errorf("partition group: %w", kit.ErrUnavailable)
	}
	return st, nil
}

// List returns the names of the groups that have a node, sorted.
func (p *Partitions) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, p.s, p.dir)
}

// Follower follows one group.
type Follower = kit.Follower[*State]

// Follow starts following group; Close stops.
func (p *Partitions) Follow(group string) (*Follower, error) {
	if err := kit.CheckName("group", group); err != nil {
		return nil, err
	}
	return p.followers.Follow(group), nil
}

// await waits up to d for a state read under a connected session for which
// cond holds; it returns the last such state (nil: none) and whether cond held.
func await(ctx context.Context, f *Follower, d time.Duration, cond func(*State) bool) (*State, bool) {
	st, ok := f.Await(ctx, d, func(st *State) bool { return !st.Suspended && cond(st) })
	if st != nil && st.Suspended {
		return nil, false
	}
	return st, ok
}

// Member answers a live member's view.
func (p *Partitions) Member(ctx context.Context, group, id string) (*MemberState, error) {
	if err := kit.CheckName("member", id); err != nil {
		return nil, err
	}
	st, err := p.Inspect(ctx, group)
	if err != nil {
		return nil, err
	}
	return st.member(id)
}

// AwaitMember answers the member's view once its version differs from
// version, or when wait ends. ErrMemberNotFound once it is gone. Suspension
// is not loss: through the first part of a suspension the member keeps what
// it owns (its nodes stand) and the long-poll goes on waiting; once the
// session could have expired (or there is none) it answers ErrUnavailable at
// once: nothing is owned, the member must stop work.
func (p *Partitions) AwaitMember(ctx context.Context, group, id string, version int64, wait time.Duration) (*MemberState, error) {
	if err := kit.CheckName("member", id); err != nil {
		return nil, err
	}
	f, err := p.Follow(group)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, _ := f.Await(ctx, wait, func(st *State) bool {
		if st.doubted {
			return true
		}
		m, err := st.member(id)
		return err != nil || m.Version != version
	})
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if st == nil || st.doubted {
		return nil, fmt.Errorf("member %q of %q: the session is not connected, nothing is owned now: %w", id, group, kit.ErrUnavailable)
	}
	return st.member(id)
}

func (st *State) member(id string) (*MemberState, error) {
	for i := range st.Members {
		if st.Members[i].ID == id {
			m := st.Members[i]
			return &m, nil
		}
	}
	return nil, fmt.Errorf("member %q of %q: %w", id, st.Group, ErrMemberNotFound)
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type metrics struct {
	members   prometheus.Gauge
	led       prometheus.Gauge
	watched   prometheus.Gauge
	plans     prometheus.Counter
	conflicts prometheus.Counter
	taken     prometheus.Counter
	released  prometheus.Counter
	owned     prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	f := promauto.With(reg)
	return metrics{
		members: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_partition_members", Help: "Partition-group members joined by leases of this sidecar.",
		}),
		led: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_partition_groups_led", Help: "Partition groups whose leader (planning member) is on this sidecar.",
		}),
		watched: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_partition_groups_watched", Help: "Partition groups this sidecar follows with one set of ZooKeeper watches each.",
		}),
		plans: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_partition_plans_total", Help: "Plans written by this sidecar as a group's leader (one ZooKeeper transaction each).",
		}),
		conflicts: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_partition_plan_conflicts_total", Help: "Plan writes refused (another writer came first, or the writer no longer led); the writer reads again.",
		}),
		taken: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_partition_takes_total", Help: "Partitions taken (owner nodes made) for members of this sidecar.",
		}),
		released: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_partition_releases_total", Help: "Partitions let go (owner nodes deleted) by members of this sidecar: acks, leaves and lease ends.",
		}),
		owned: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_partition_owned", Help: "Partitions owned by members of this sidecar.",
		}),
	}
}
