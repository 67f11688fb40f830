package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
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
// `count` participants. See Enter and Leave.
type Barriers struct {
	s       *Session
	dir     string // <root>/barriers
	dblDir  string // <root>/double-barriers
	metrics barrierMetrics

	mu       sync.Mutex
	enrolled map[string]*dblParticipant // name/id → participant enrolled here
}

// Sentinel errors of the barrier recipes (wrapped with %w; the HTTP layer maps
// each to its problem type).
var (
	// ErrBarrierRaised: the barrier was still raised when the wait ended.
	ErrBarrierRaised = errors.New("barrier raised")
	// ErrBarrierNotReady: fewer than `count` participants had entered when the wait
	// ended; the participant stays enrolled. See BarrierNotReadyError.
	ErrBarrierNotReady = errors.New("double barrier not ready")
	// ErrBarrierNotEmpty: participants were still inside when the wait to leave
	// ended; the own entry is removed already.
	ErrBarrierNotEmpty = errors.New("double barrier not empty")
	// ErrParticipantExists: the participant id is enrolled already, by another
	// lease or another client.
	ErrParticipantExists = errors.New("participant exists")
)

const barrierKind = "barrier"

// NewBarriers returns the barrier recipes over a session.
func NewBarriers(s *Session, reg prometheus.Registerer) *Barriers {
	return &Barriers{
		s:        s,
		dir:      path.Join(s.Root(), "barriers"),
		dblDir:   path.Join(s.Root(), "double-barriers"),
		metrics:  newBarrierMetrics(reg),
		enrolled: map[string]*dblParticipant{},
	}
}

func (b *Barriers) node(name string) string { return b.dir + "/" + name }

// Raise raises the barrier until it is lowered: a persistent node. A barrier
// raised for a lease becomes persistent (that lease no longer lowers it).
func (b *Barriers) Raise(ctx context.Context, name string) error {
	if err := CheckName("barrier", name); err != nil {
		return err
	}
	ep, err := b.s.current()
	if err != nil {
		return err
	}
	p := b.node(name)
	for {
		err := createIn(ctx, ep, p, nil, zk.FlagPersistent)
		switch {
		case err == nil:
			return nil
		case !errors.Is(err, zk.ErrNodeExists):
			return fmt.Errorf("raise barrier %q: %w", name, err)
		}
		var st *zk.Stat
		var exists bool
		err = ep.call(ctx, func(c *zk.Conn) error {
			var err error
			exists, st, err = c.Exists(p)
			return err
		})
		switch {
		case err != nil:
			return fmt.Errorf("raise barrier %q: %w", name, err)
		case !exists:
			continue // lowered meanwhile
		case st.EphemeralOwner == 0:
			return nil // raised already, persistently
		}
		switch err := b.replace(ctx, ep, p, st.Version, nil, zk.FlagPersistent); {
		case err == nil:
			return nil
		case !errors.Is(err, errBarrierChanged):
			return fmt.Errorf("raise barrier %q: %w", name, err)
		}
	}
}

var errBarrierChanged = errors.New("changed meanwhile; retry")

// replace swaps the barrier node for a new one in one transaction. errBarrierChanged means
// the node changed meanwhile.
func (b *Barriers) replace(ctx context.Context, ep *epoch, p string, version int32, data []byte, flags int32) error {
	err := ep.call(ctx, func(c *zk.Conn) error {
		_, err := c.Multi(
			&zk.DeleteRequest{Path: p, Version: version},
			&zk.CreateRequest{Path: p, Data: data, Acl: openACL, Flags: flags},
		)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
		return errBarrierChanged
	}
	return err
}

// RaiseFor raises the barrier for lease: it falls when the lease ends (revoked,
// expired or its session lost). A barrier raised already (persistently or for
// another lease) is taken over by this lease. Raising it again for the same lease
// does nothing.
func (b *Barriers) RaiseFor(ctx context.Context, lease *Lease, name string) error {
	if err := CheckName("barrier", name); err != nil {
		return err
	}
	h := Hold{Kind: barrierKind, Name: name}
	p := b.node(name)
	ep := lease.ep
	for {
		_, ok, err := lease.reserve(h)
		if err != nil {
			return err
		}
		if !ok {
			break
		}
		// Held already: still ours, or lowered or taken over since?
		mine, err := b.owned(ctx, ep, p, lease.ID)
		if err != nil || mine {
			return err
		}
		_, _ = lease.take(h) // a stale hold: its release would find nothing of ours
	}
	if err := lease.connected(); err != nil {
		lease.unreserve(h)
		return fmt.Errorf("barrier %q: %w", name, err)
	}
	if err := b.createFor(ctx, ep, p, lease.ID); err != nil {
		lease.unreserve(h)
		return fmt.Errorf("raise barrier %q: %w", name, err)
	}
	release := func(ctx context.Context) error {
		return settle(ctx, ep, func(ctx context.Context) error { return b.dropOwned(ctx, ep, p, lease.ID) })
	}
	if err := lease.grant(h, name, release); err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), b.s.cfg.OpTimeout)
		defer cancel()
		_ = release(cctx)
		return err
	}
	return nil
}

// createFor makes p an ephemeral node of ep's session holding leaseID, replacing
// whatever barrier node is there.
func (b *Barriers) createFor(ctx context.Context, ep *epoch, p, leaseID string) error {
	data := []byte(leaseID)
	for {
		err := createIn(ctx, ep, p, data, zk.FlagEphemeral)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			// The answer may be lost with the connection: adopt our node if it is there.
			if err := waitConnected(ctx, ep); err != nil {
				return err
			}
			if mine, err := b.owned(ctx, ep, p, leaseID); err != nil || mine {
				return err
			}
			continue
		case !errors.Is(err, zk.ErrNodeExists):
			return err
		}
		var st *zk.Stat
		var got []byte
		err = ep.call(ctx, func(c *zk.Conn) error {
			var err error
			got, st, err = c.Get(p)
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		if st.EphemeralOwner == ep.id.Load() && string(got) == leaseID {
			return nil
		}
		if err := b.replace(ctx, ep, p, st.Version, data, zk.FlagEphemeral); !errors.Is(err, errBarrierChanged) {
			return err
		}
	}
}

// owned reports whether p is the ephemeral node of ep's session made for leaseID.
func (b *Barriers) owned(ctx context.Context, ep *epoch, p, leaseID string) (bool, error) {
	var data []byte
	var st *zk.Stat
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(p)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st.EphemeralOwner == ep.id.Load() && string(data) == leaseID, nil
}

// dropOwned deletes p if it is still the node made for leaseID. Between the read
// and the version-checked delete another client could lower the barrier and raise
// it again (a new node has version 0 too); that window is one round trip.
func (b *Barriers) dropOwned(ctx context.Context, ep *epoch, p, leaseID string) error {
	var data []byte
	var st *zk.Stat
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(p)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	if st.EphemeralOwner != ep.id.Load() || string(data) != leaseID {
		return nil // lowered and raised again, or taken over: not ours to lower
	}
	err = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(p, st.Version) })
	if errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion) {
		return nil
	}
	return err
}

// Lower lowers the barrier, however it was raised. Lowering a lowered barrier
// does nothing.
func (b *Barriers) Lower(ctx context.Context, name string) error {
	if err := CheckName("barrier", name); err != nil {
		return err
	}
	ep, err := b.s.current()
	if err != nil {
		return err
	}
	err = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(b.node(name), -1) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("lower barrier %q: %w", name, err)
	}
	return nil
}

// Raised reports whether the barrier is raised now.
func (b *Barriers) Raised(ctx context.Context, name string) (bool, error) {
	if err := CheckName("barrier", name); err != nil {
		return false, err
	}
	ep, err := b.s.current()
	if err != nil {
		return false, err
	}
	var exists bool
	err = ep.call(ctx, func(c *zk.Conn) error {
		var err error
		exists, _, err = c.Exists(b.node(name))
		return err
	})
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
	if err := CheckName("barrier", name); err != nil {
		return err
	}
	start := time.Now()
	defer func() { b.metrics.observe("barrier", start, err) }()
	d := newDeadline(wait)
	defer d.stop()
	gone, err := awaitGone(ctx, b.s, b.node(name), d)
	if err == nil && !gone {
		err = fmt.Errorf("barrier %q: %w", name, ErrBarrierRaised)
	}
	return err
}

// awaitGone waits until node p does not exist: true once it is gone (or never
// was), false when d is over first. It watches p, so it answers within a round
// trip of the delete, and it rides out a suspension or a new session within d.
func awaitGone(ctx context.Context, s *Session, p string, d *waitDeadline) (bool, error) {
	for {
		changed := s.Changed()
		ep, err := s.current()
		var exists bool
		var watch <-chan zk.Event
		if err == nil {
			err = ep.call(ctx, func(c *zk.Conn) error {
				var err error
				exists, _, watch, err = c.ExistsW(p)
				return err
			})
		}
		if err != nil {
			if waitOutSession(ctx, err, changed, d) {
				continue
			}
			return false, err
		}
		if !exists {
			return true, nil
		}
		if d.expired() {
			return false, nil
		}
		select {
		case <-watch:
		case <-d.C:
			d.C = expiredC
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-ep.lost:
		}
	}
}

type barrierMetrics struct {
	waits        *prometheus.HistogramVec
	participants prometheus.Gauge
}

func newBarrierMetrics(reg prometheus.Registerer) barrierMetrics {
	m := barrierMetrics{
		waits: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "coord_barrier_wait_duration_seconds",
			Help:    "Time from a barrier wait, double-barrier enter or leave to its outcome, by operation (wait, enter, leave) and result (passed, timeout, cancelled, error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"op", "result"}),
		participants: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_double_barrier_participants",
			Help: "Double-barrier participants enrolled by leases of this sidecar.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.waits, m.participants)
	}
	return m
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
