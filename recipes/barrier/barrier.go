package barrier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Barriers are ZooKeeper barriers and double barriers.
//
// A barrier is the node <root>/barriers/<name>: raised while it exists, lowered
// when it does not (the layout of Curator's DistributedBarrier, so either side may
// be a Curator client). Raised without a lease it is a persistent node that stays
// until lowered; raised for a lease it is an ephemeral node of the sidecar's
// session holding the lease's id, removed when the lease ends. The last raise
// decides which of the two it is.
//
// Double barriers follow the enter/leave protocol of the ZooKeeper recipes page
// under the container <root>/double-barriers/<name>: one ephemeral node p-<id>
// per participant, held by a lease, and the node "ready" created by whoever sees
// `count` participants. See Enter and Leave (doublebarrier.go).
type Barriers struct {
	s       *zookeeper.Session
	dir     string // <root>/barriers
	dblDir  string // <root>/double-barriers
	metrics barrierMetrics

	mu       sync.Mutex
	enrolled map[string]*dblParticipant // name/id → participant enrolled here
}

// BarrierKind is the kind of a barrier raised for a lease among its holds
// (kit.Hold); the hold's name is the barrier's.
const BarrierKind = "barrier"

const barrierKind = BarrierKind

// New returns the barrier recipes over a session.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Barriers {
	return &Barriers{
		s:        s,
		dir:      s.Dir("barriers"),
		dblDir:   s.Dir("double-barriers"),
		metrics:  newBarrierMetrics(reg),
		enrolled: map[string]*dblParticipant{},
	}
}

func (b *Barriers) node(name string) string { return b.dir + "/" + name }

// Raise raises the barrier until it is lowered: a persistent node. A barrier
// raised for a lease becomes persistent (that lease no longer lowers it).
func (b *Barriers) Raise(ctx context.Context, name string) error {
	if err := kit.CheckName("barrier", name); err != nil {
		return err
	}
	ep, err := b.s.Await(ctx)
	if err != nil {
		return err
	}
	p := b.node(name)
	for {
		err := ep.CreateIn(ctx, p, nil, zookeeper.Persistent)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, zookeeper.ErrNodeExists):
			return fmt.Errorf("raise barrier %q: %w", name, err)
		}
		exists, st, err := ep.Exists(ctx, p)
		switch {
		case err != nil:
			return fmt.Errorf("raise barrier %q: %w", name, err)
		case !exists:
			continue // lowered meanwhile
		case st.EphemeralOwner == 0:
			return nil // raised already, persistently
		}
		switch err := b.replace(ctx, ep, p, st.Version, nil, zookeeper.Persistent); {
		case err == nil:
			return nil
		case !errors.Is(err, errBarrierChanged):
			return fmt.Errorf("raise barrier %q: %w", name, err)
		}
	}
}

var errBarrierChanged = errors.New("changed meanwhile; retry")

// replace swaps the barrier node for a new one in one transaction.
// errBarrierChanged means the node changed meanwhile.
func (b *Barriers) replace(ctx context.Context, ep *zookeeper.Epoch, p string, version int32, data []byte, mode int32) error {
	// The create tells whether a transaction whose answer was lost was applied.
	_, err := ep.MultiCheckedOn(ctx, 1, zookeeper.DeleteOp{Path: p, Version: version}, zookeeper.CreateOp{Path: p, Data: data, Mode: mode})
	if errors.Is(err, zookeeper.ErrNoNode) || errors.Is(err, zookeeper.ErrBadVersion) {
		return errBarrierChanged
	}
	return err
}

// raisedBarrier is a barrier raised for a lease: the lease's holding.
type raisedBarrier struct {
	b       *Barriers
	ep      *zookeeper.Epoch
	path    string
	leaseID string
}

// HeldNodes is the barrier's node: deleted by another hand (the barrier
// lowered), the raise is over.
func (r *raisedBarrier) HeldNodes() []string { return []string{r.path} }

// Release lowers the barrier if it is still the node raised for the lease.
func (r *raisedBarrier) Release(ctx context.Context) error {
	return r.ep.Settle(ctx, func(ctx context.Context) error { return r.b.dropOwned(ctx, r.ep, r.path, r.leaseID) })
}

// AdoptRaised makes the barrier h, raised for lease, the lease's again after a
// restart (a kit.Adopter): its one saved node is the barrier's node, still an
// ephemeral node of the lease's (resumed) session holding the lease's id (not
// lowered, nor taken over, meanwhile). The barrier stays raised throughout.
func (b *Barriers) AdoptRaised(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	if err := kit.CheckName("barrier", h.Name); err != nil {
		return nil, err
	}
	p := b.node(h.Name)
	if len(h.Nodes) != 1 || h.Nodes[0] != p {
		return nil, fmt.Errorf("barrier %q: saved nodes %v are not its node %s", h.Name, h.Nodes, p)
	}
	data, _, err := kit.OwnedNode(ctx, lease, p)
	if err != nil {
		return nil, fmt.Errorf("barrier %q: %w", h.Name, err)
	}
	if string(data) != lease.ID {
		return nil, fmt.Errorf("barrier %q: raised for another lease since", h.Name)
	}
	return &raisedBarrier{b: b, ep: lease.Epoch(), path: p, leaseID: lease.ID}, nil
}

// RaiseFor raises the barrier for lease: it falls when the lease ends (revoked,
// expired or its session lost). A barrier raised already (persistently or for
// another lease) is taken over by this lease. Raising it again for the same lease
// does nothing.
func (b *Barriers) RaiseFor(ctx context.Context, lease *kit.Lease, name string) error {
	if err := kit.CheckName("barrier", name); err != nil {
		return err
	}
	h := kit.Hold{Kind: barrierKind, Name: name}
	p := b.node(name)
	for {
		r, found, err := kit.Acquire(ctx, lease, h, func(ctx context.Context, ep *zookeeper.Epoch) (*raisedBarrier, error) {
			if err := b.createFor(ctx, ep, p, lease.ID); err != nil {
				return nil, fmt.Errorf("raise barrier %q: %w", name, err)
			}
			return &raisedBarrier{b: b, ep: ep, path: p, leaseID: lease.ID}, nil
		})
		if !found {
			return err
		}
		// Held already: still ours, or lowered or taken over since?
		mine, err := b.owned(ctx, r.ep, p, lease.ID)
		if err != nil || mine {
			return err
		}
		_, _ = kit.Take[*raisedBarrier](lease, h) // a stale hold: its release would find nothing of ours
	}
}

// createFor makes p an ephemeral node of ep's session holding leaseID, replacing
// whatever barrier node is there.
func (b *Barriers) createFor(ctx context.Context, ep *zookeeper.Epoch, p, leaseID string) error {
	data := []byte(leaseID)
	for {
		st, err := ep.CreateOwned(ctx, p, data, false)
		if !errors.Is(err, zookeeper.ErrNodeExists) {
			return err
		}
		if err := b.replace(ctx, ep, p, st.Version, data, zookeeper.Ephemeral); !errors.Is(err, errBarrierChanged) {
			return err
		}
	}
}

// owned reports whether p is the ephemeral node of ep's session made for leaseID.
func (b *Barriers) owned(ctx context.Context, ep *zookeeper.Epoch, p, leaseID string) (bool, error) {
	data, st, err := ep.Get(ctx, p)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.EphemeralOwner == ep.ID() && string(data) == leaseID, nil
}

// dropOwned deletes p if it is still the node made for leaseID. Between the read
// and the version-checked delete another client could lower the barrier and raise
// it again (a new node has version 0 too); that window is one round trip.
func (b *Barriers) dropOwned(ctx context.Context, ep *zookeeper.Epoch, p, leaseID string) error {
	data, st, err := ep.Get(ctx, p)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.EphemeralOwner != ep.ID() || string(data) != leaseID {
		return nil // lowered and raised again, or taken over: not ours to lower
	}
	err = ep.DeleteChecked(ctx, p, st.Version)
	if errors.Is(err, zookeeper.ErrNoNode) || errors.Is(err, zookeeper.ErrBadVersion) {
		return nil
	}
	return err
}

// Lower lowers the barrier, however it was raised. Lowering a lowered barrier
// does nothing.
func (b *Barriers) Lower(ctx context.Context, name string) error {
	if err := kit.CheckName("barrier", name); err != nil {
		return err
	}
	ep, err := b.s.Await(ctx)
	if err != nil {
		return err
	}
	if err := ep.DeleteChecked(ctx, b.node(name), -1); err != nil && !errors.Is(err, zookeeper.ErrNoNode) {
		return fmt.Errorf("lower barrier %q: %w", name, err)
	}
	return nil
}

// Raised reports whether the barrier is raised now.
func (b *Barriers) Raised(ctx context.Context, name string) (bool, error) {
	if err := kit.CheckName("barrier", name); err != nil {
		return false, err
	}
	ep, err := b.s.Await(ctx)
	if err != nil {
		return false, err
	}
	exists, _, err := ep.Exists(ctx, b.node(name))
	if err != nil {
		return false, fmt.Errorf("barrier %q: %w", name, err)
	}
	return exists, nil
}

// Wait returns nil once the barrier is lowered (at once if it is), or
// ErrBarrierRaised when it is still raised after wait (0: look once). It watches
// the node, so it answers within a round trip of the lowering; through a
// suspension it waits for the session to come back within wait.
func (b *Barriers) Wait(ctx context.Context, name string, wait time.Duration) (err error) {
	if err := kit.CheckName("barrier", name); err != nil {
		return err
	}
	start := time.Now()
	defer func() { b.metrics.observe("barrier", start, err) }()
	d := kit.NewDeadline(wait)
	defer d.Stop()
	gone, err := kit.AwaitGone(ctx, b.s, b.node(name), d)
	if err == nil && !gone {
		err = fmt.Errorf("barrier %q: %w", name, ErrBarrierRaised)
	}
	return err
}

// List returns the names of the barriers that are raised.
func (b *Barriers) List(ctx context.Context) ([]string, error) { return kit.ListNames(ctx, b.s, b.dir) }

// ListDouble returns the names of the double barriers that have a node.
func (b *Barriers) ListDouble(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, b.s, b.dblDir)
}

type barrierMetrics struct {
	waits        *prometheus.HistogramVec
	participants prometheus.Gauge
}

func newBarrierMetrics(reg prometheus.Registerer) barrierMetrics {
	f := promauto.With(reg)
	return barrierMetrics{
		waits: kit.WaitSeconds(f, "coord_barrier_wait_duration_seconds",
			"Time from a barrier wait, double-barrier enter or leave to its outcome, by operation (wait, enter, leave) and result (passed, timeout, cancelled, error).",
			"op", "result"),
		participants: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_double_barrier_participants",
			Help: "Double-barrier participants enrolled by leases of this sidecar.",
		}),
	}
}

func (m barrierMetrics) observe(op string, start time.Time, err error) {
	result := "passed"
	switch {
	case err == nil:
	case errors.Is(err, ErrBarrierRaised), errors.Is(err, ErrBarrierNotReady), errors.Is(err, ErrBarrierNotEmpty):
		result = "timeout"
	case errors.Is(err, context.Canceled):
		result = "cancelled"
	default:
		result = "error"
	}
	m.waits.WithLabelValues(op, result).Observe(time.Since(start).Seconds())
}
