package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
)

// Locks are exclusive, fair locks in ZooKeeper, with fencing tokens.
//
// Layout: <root>/locks/<name>/_c_<guid>-lock-<seq>, the layout of Curator's
// InterProcessMutex and go-zookeeper's Lock: ephemeral sequential nodes created in
// protected mode under a container parent. Contenders are ordered by the 10-digit
// sequence suffix whatever their prefix, so Curator, go-zookeeper and kazoo
// contenders on the same path are served in one order and exclude each other.
// Each waiter watches only its predecessor.
type Locks struct {
	s       *Session
	dir     string
	metrics lockMetrics
}

// LockGrant is a held lock.
type LockGrant struct {
	Name  string
	Lease string
	Owner string
	// FencingToken is the holder node's creation zxid: it strictly increases with
	// every new holder of the lock, across every client of the ensemble, forever.
	FencingToken int64
	AcquiredAt   time.Time
	node         string
}

// LockHolder is the current holder of a lock as anyone can see it.
type LockHolder struct {
	Owner        string
	FencingToken int64
	Since        time.Time
}

// LockState is a lock's holder (nil when free) and the number of waiters.
type LockState struct {
	Name    string
	Holder  *LockHolder
	Waiters int
}

const lockKind = "lock"

// NewLocks returns the lock recipe over a session.
func NewLocks(s *Session, reg prometheus.Registerer) *Locks {
	return &Locks{s: s, dir: path.Join(s.Root(), "locks"), metrics: newLockMetrics(reg)}
}

func (l *Locks) parent(name string) string { return l.dir + "/" + name }

// Acquire takes the lock for lease, waiting at most wait (0: try once). It returns
// the grant; a LockedError (ErrLocked) when not granted within wait; ErrLeaseEnded
// when the lease ended meanwhile; ErrSessionLost or ErrUnavailable on ZooKeeper
// trouble; ctx's error when ctx ended (the client went away). On every failure the
// contender node is deleted (with a fresh bounded context) before Acquire returns,
// and an implicit lease ends. A lease that holds the lock already gets its grant
// again; one that is acquiring it already gets ErrBusy.
func (l *Locks) Acquire(ctx context.Context, lease *Lease, name, owner string, wait time.Duration) (*LockGrant, error) {
	if err := CheckName("lock", name); err != nil {
		return nil, err
	}
	start := time.Now()
	h := Hold{Kind: lockKind, Name: name}
	existing, ok, err := lease.reserve(h)
	if err != nil {
		return nil, err
	}
	if ok {
		return existing.(*LockGrant), nil
	}
	if lease.Implicit {
		// An implicit lease is the client's only handle on the lock: its TTL counts
		// from the grant, not from the start of a long wait.
		defer lease.Pin()()
	}
	l.metrics.waiting.Inc()
	g, err := l.acquire(ctx, lease, h, owner, wait)
	l.metrics.waiting.Dec()
	l.metrics.acquire.WithLabelValues(acquireResult(err)).Observe(time.Since(start).Seconds())
	if err != nil {
		lease.unreserve(h)
		return nil, err
	}
	l.metrics.held.Inc()
	return g, nil
}

func acquireResult(err error) string {
	switch {
	case err == nil:
		return "granted"
	case errors.Is(err, ErrLocked):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	default:
		return "error"
	}
}

func (l *Locks) acquire(ctx context.Context, lease *Lease, h Hold, owner string, wait time.Duration) (*LockGrant, error) {
	ep := lease.ep
	if err := lease.connected(); err != nil {
		return nil, fmt.Errorf("lock %q: %w", h.Name, err)
	}
	parent := l.parent(h.Name)
	guid := newGUID()
	c, err := createProtected(ctx, ep, parent, guid, "lock-", []byte(owner), true)
	if err != nil {
		cleanupProtected(ep, parent, guid, "")
		return nil, err
	}
	node := c.Path
	g, err := l.await(ctx, lease, ep, h.Name, c, owner, wait)
	if err == nil && ctx.Err() != nil {
		// The client went away as it was granted: it would never know it holds
		// the lock, so it does not.
		err = fmt.Errorf("lock %q: %w", h.Name, ctx.Err())
	}
	if err == nil {
		release := func(ctx context.Context) error {
			l.metrics.held.Dec()
			ep.s.handoffs.letGo(node) // a grant is the head of its line
			return deleteProtected(ctx, ep, parent, guid, node)
		}
		if err = lease.grant(h, g, release); err == nil {
			return g, nil
		}
	}
	cleanupProtected(ep, parent, guid, node)
	return nil, err
}

// await waits until node holds the lock (see awaitHead).
func (l *Locks) await(ctx context.Context, lease *Lease, ep *epoch, name string, c created, owner string, wait time.Duration) (*LockGrant, error) {
	node := c.Path
	place, err := awaitHead(ctx, ep, c, wait, lease.Ending())
	switch {
	case err != nil:
		return nil, fmt.Errorf("lock %q: %w", name, err)
	case !place.Head:
		holder, _ := l.holder(ctx, ep, path.Dir(node), place.Line)
		return nil, &LockedError{Name: name, Holder: holder}
	}
	return &LockGrant{Name: name, Lease: lease.ID, Owner: owner, FencingToken: place.Czxid, AcquiredAt: time.Now(), node: node}, nil
}

func (l *Locks) list(ctx context.Context, ep *epoch, parent string, out *[]string) error {
	return ep.call(ctx, func(c *zk.Conn) error {
		var err error
		*out, _, err = c.Children(parent)
		return err
	})
}

// holder reads the first contender of a sorted listing (nil when there is none).
func (l *Locks) holder(ctx context.Context, ep *epoch, parent string, sorted []string) (*LockHolder, error) {
	for len(sorted) > 0 {
		var data []byte
		var st *zk.Stat
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			data, st, err = c.Get(parent + "/" + sorted[0])
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			sorted = sorted[1:] // released meanwhile: the next one holds it
			continue
		}
		if err != nil {
			return nil, err
		}
		return &LockHolder{Owner: string(data), FencingToken: st.Czxid, Since: time.UnixMilli(st.Ctime)}, nil
	}
	return nil, nil
}

// Release releases the lock held by lease, deleting its node. It returns
// ErrNotHeld when the lease does not hold it. An implicit lease ends with it.
func (l *Locks) Release(ctx context.Context, lease *Lease, name string) error {
	if err := CheckName("lock", name); err != nil {
		return err
	}
	h, err := lease.take(Hold{Kind: lockKind, Name: name})
	if err != nil {
		return err
	}
	err = h.release(ctx)
	lease.released()
	return err
}

// Inspect returns the lock's holder and the number of waiters (on every client).
func (l *Locks) Inspect(ctx context.Context, name string) (*LockState, error) {
	if err := CheckName("lock", name); err != nil {
		return nil, err
	}
	ep, err := l.s.current()
	if err != nil {
		return nil, err
	}
	parent := l.parent(name)
	var children []string
	err = l.list(ctx, ep, parent, &children)
	if errors.Is(err, zk.ErrNoNode) {
		return &LockState{Name: name}, nil
	}
	if err != nil {
		return nil, err
	}
	sorted := sortBySeq(children)
	holder, err := l.holder(ctx, ep, parent, sorted)
	if err != nil {
		return nil, err
	}
	st := &LockState{Name: name, Holder: holder}
	if len(sorted) > 1 {
		st.Waiters = len(sorted) - 1
	}
	return st, nil
}

type lockMetrics struct {
	acquire *prometheus.HistogramVec
	held    prometheus.Gauge
	waiting prometheus.Gauge
}

func newLockMetrics(reg prometheus.Registerer) lockMetrics {
	m := lockMetrics{
		acquire: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "coord_lock_acquire_duration_seconds",
			Help:    "Time from an acquire request to its outcome, by result (granted, timeout, cancelled, error).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"result"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_locks_held", Help: "Locks held by leases of this sidecar.",
		}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_lock_acquisitions_in_progress", Help: "Lock acquisitions under way on this sidecar.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.acquire, m.held, m.waiting)
	}
	return m
}
