package lock

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/line"
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
	s       *zookeeper.Session
	dir     string
	metrics line.Metrics
	// handoffs tells a waiter that its predecessor, the head, was let go here.
	handoffs line.Handoffs
	// followers follow single locks (event streams; see Follow).
	followers *kit.Followers[*LockState]
	// grants dates the holders' since (line.Grants).
	grants line.Grants
	// multi times the multi-locks (AcquireAll), every lock or none.
	multi *prometheus.HistogramVec
	// parents are the lines' paths (dir/name) by lock name, for the first
	// maxParents names met: a cycle on one of them makes no string for it.
	parents  sync.Map // name -> string
	nParents atomic.Int32
}

// maxParents bounds the names whose lines' paths Locks keeps (parents): about
// 1 MiB at most, whatever names clients use (a name is checked, at most 128
// bytes, before its path is made).
const maxParents = 4096

// LockGrant is a held lock: the lease's holding.
type LockGrant struct {
	Name  string
	Lease string
	Owner string
	// FencingToken is the holder node's creation zxid: it strictly increases with
	// every new holder of the lock, across every client of the ensemble, forever.
	FencingToken int64
	AcquiredAt   time.Time

	locks *Locks
	ep    *zookeeper.Epoch
	node  zookeeper.Created
	// held is node's path, as HeldNodes gives it (no slice made per call).
	held [1]string
}

// LockHolder is the current holder of a lock as anyone can see it.
type LockHolder struct {
	Owner        string
	FencingToken int64
	// Since is when it was granted: exact for a grant made through this
	// sidecar, else as line.Grants tells.
	Since time.Time
}

// LockState is a lock's holder (nil when free) and the number of waiters.
type LockState struct {
	Name    string
	Holder  *LockHolder
	Waiters int
	// Zxid is the newest change of the contenders the state reflects (a
	// follower's state only; for event ids).
	Zxid int64
	// Suspended is set (on a follower's state) while this sidecar's session is
	// not connected. During the first part of a suspension the state is the
	// last one read; once the session could have expired
	// (zookeeper.Session.InDoubt), or while there is none, Holder is nil and
	// Waiters 0: nobody can be vouched for.
	Suspended bool
	// SuspendedSince is when the suspension began; zero when not suspended
	// (or when the session is lost or not yet made).
	SuspendedSince time.Time
}

// LockKind is the kind of a lock's hold on its lease (kit.Hold).
const LockKind = "lock"

const lockKind = LockKind

// New returns the lock recipe over a session.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Locks {
	l := &Locks{s: s, dir: s.Dir("locks"), metrics: newLockMetrics(reg),
		multi: kit.WaitSeconds(promauto.With(reg), "coord_multilock_acquire_duration_seconds",
			"Time from a multi-lock request to its outcome (every lock or none), by result (granted, timeout, cancelled, error).", "result")}
	l.followers = kit.NewFollowers(s, l.metrics.Watched, func(name string) kit.Source[*LockState] {
		return &lockSource{l: l, name: name}
	})
	return l
}

// parent returns the path of the line of lock name, dir/name.
func (l *Locks) parent(name string) string {
	if p, ok := l.parents.Load(name); ok {
		return p.(string)
	}
	p := l.dir + "/" + name
	if l.nParents.Load() < maxParents {
		// Keyed by p's own copy of name: the caller's may be part of a larger
		// string (a request's path) that the cache must not keep.
		if _, loaded := l.parents.LoadOrStore(p[len(l.dir)+1:], p); !loaded {
			l.nParents.Add(1)
		}
	}
	return p
}

// Lines is the node under which each lock is a line of contender nodes.
func (l *Locks) Lines() string { return l.dir }

// Acquire takes the lock for the lease of src, waiting at most wait (0: try
// once); the name is checked before src is asked for the lease. It returns
// the grant; a LockedError (ErrLocked) when not granted within wait;
// kit.ErrLeaseEnded when the lease ended meanwhile; kit.ErrSessionLost or
// kit.ErrUnavailable on ZooKeeper trouble; ctx's error when ctx ended (the client
// went away). On every failure the contender node is deleted before Acquire
// returns, with a fresh context bounded by the session's OpTimeout
// (zookeeper.Epoch.CleanupProtected: in a suspension longer than that, the
// delete goes on in the background until the session is back or lost), and an
// implicit lease ends. A lease that holds the lock already gets its grant again;
// one that is acquiring it already gets kit.ErrBusy.
func (l *Locks) Acquire(ctx context.Context, src kit.LeaseSource, name, owner string, wait time.Duration) (*LockGrant, error) {
	// step is the lock's own part of the hold protocol, which kit.Acquire runs
	// under the lease's connected session once the hold is reserved; lease is
	// the one src gives below, once the name is checked.
	var lease *kit.Lease
	step := func(ctx context.Context, ep *zookeeper.Epoch) (*LockGrant, error) {
		return l.acquire(ctx, ep, lease, name, owner, wait)
	}
	if err := kit.CheckName("lock", name); err != nil {
		return nil, err
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	l.metrics.Waiting.Inc()
	g, found, err := kit.Acquire(ctx, lease, kit.Hold{Kind: lockKind, Name: name}, step)
	l.metrics.Waiting.Dec()
	if !found {
		l.metrics.Acquire.WithLabelValues(line.AcquireResult(err, ErrLocked)).Observe(time.Since(start).Seconds())
	}
	return g, err
}

// acquire makes the contender node and waits for it to reach the head.
func (l *Locks) acquire(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, name, owner string, wait time.Duration) (*LockGrant, error) {
	parent := l.parent(name)
	c, err := ep.CreateProtected(ctx, parent, "lock-", []byte(owner), true)
	if err != nil {
		return nil, err
	}
	l.handoffs.Enter(c.Path)
	var place line.Place
	if c.Alone && c.Czxid != 0 && ep.Connected() {
		// The head at once, as AwaitHead would answer it first, without its
		// line (only a refusal reads it) or the lease's ending channel (made
		// only when somebody waits on it).
		place = line.Place{Head: true, Czxid: c.Czxid}
	} else {
		place, err = line.AwaitHead(ctx, ep, c, wait, lease.Ending(), &l.handoffs)
	}
	switch {
	case err != nil:
		err = fmt.Errorf("lock %q: %w", name, err)
	case !place.Head:
		holder, _ := l.holder(ctx, ep, parent, place.Line)
		err = &LockedError{Name: name, Holder: holder}
	case ctx.Err() != nil:
		// The client went away as it was granted: it would never know it holds
		// the lock, so it does not.
		err = fmt.Errorf("lock %q: %w", name, ctx.Err())
	}
	if err != nil {
		ep.CleanupProtected(parent, c.GUID, c.Path)
		l.handoffs.Left(c.Path)
		return nil, err
	}
	l.metrics.Held.Inc()
	at := time.Now()
	l.grants.Granted(c.Path, at)
	return &LockGrant{Name: name, Lease: lease.ID, Owner: owner, FencingToken: place.Czxid, AcquiredAt: at,
		locks: l, ep: ep, node: c, held: [1]string{c.Path}}, nil
}

// Adopt re-creates lease's grant of the lock h.Name from its saved node after
// a restart that resumed the session (a kit.Adopter): the node must be the
// session's own and head its line, so nobody else was granted the lock
// meanwhile. The fencing token is the node's czxid, as at the grant; the owner
// its data.
func (l *Locks) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	what := fmt.Sprintf("lock %q", h.Name)
	parent := l.parent(h.Name)
	node, data, st, order, err := line.Saved(ctx, lease, h, parent, what)
	if err != nil {
		return nil, err
	}
	ep := lease.Epoch()
	if len(order) == 0 || parent+"/"+order[0] != node.Path {
		return nil, fmt.Errorf("%s: node %s no longer heads its line", what, node.Path)
	}
	l.handoffs.Enter(node.Path)
	l.metrics.Held.Inc()
	return &LockGrant{Name: h.Name, Lease: lease.ID, Owner: string(data), FencingToken: st.Czxid,
		AcquiredAt: time.UnixMilli(st.Ctime), locks: l, ep: ep, node: node, held: [1]string{node.Path}}, nil
}

// HeldNodes is the holder node: deleted by another hand, the lock is lost.
// The slice is the grant's own: callers do not change it.
func (g *LockGrant) HeldNodes() []string { return g.held[:] }

// Release deletes the holder node, after handing the head to this sidecar's next
// waiter (see handoffs); through a suspension it retries while ctx lives, then in
// the background while the session lives (zookeeper.Epoch.DeleteProtected).
func (g *LockGrant) Release(ctx context.Context) error {
	g.locks.metrics.Held.Dec()
	g.locks.grants.Gone(g.node.Path)
	if g.locks.handoffs.LetGo(g.node.Path) { // a grant is the head of its line
		// The successor's answer is what its client waits for; the delete is
		// nobody's wait but this release's: let the successor run first.
		runtime.Gosched()
	}
	return g.ep.DeleteProtected(ctx, path.Dir(g.node.Path), g.node.GUID, g.node.Path)
}

// holder reads the first contender of a sorted listing (nil when there is none).
func (l *Locks) holder(ctx context.Context, ep *zookeeper.Epoch, parent string, sorted []string) (*LockHolder, error) {
	for len(sorted) > 0 {
		data, st, err := ep.Get(ctx, parent+"/"+sorted[0])
		if errors.Is(err, zookeeper.ErrNoNode) {
			sorted = sorted[1:] // released meanwhile: the next one holds it
			continue
		}
		if err != nil {
			return nil, err
		}
		return &LockHolder{Owner: string(data), FencingToken: st.Czxid,
			Since: l.since(parent, sorted, time.UnixMilli(st.Ctime))}, nil
	}
	return nil, nil
}

// since is when the head of a line (sorted, the head first) was granted, as far
// as this sidecar knows (line.Grants); else created, its node's creation.
func (l *Locks) since(parent string, sorted []string, created time.Time) time.Time {
	if at, ok := l.grants.Read(parent, sorted[:1], sorted[1:])[sorted[0]]; ok {
		return at
	}
	return created.UTC()
}

// Release releases the lock held by the lease of src (asked for once the name
// is checked), deleting its node. It returns kit.ErrNotHeld when the lease does
// not hold it. An implicit lease ends with it.
func (l *Locks) Release(ctx context.Context, src kit.LeaseSource, name string) error {
	if err := kit.CheckName("lock", name); err != nil {
		return err
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return err
	}
	return kit.Release(ctx, lease, kit.Hold{Kind: lockKind, Name: name})
}

// Inspect returns the lock's holder and the number of waiters (on every client).
func (l *Locks) Inspect(ctx context.Context, name string) (*LockState, error) {
	if err := kit.CheckName("lock", name); err != nil {
		return nil, err
	}
	ep, err := l.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	parent := l.parent(name)
	children, _, err := ep.Children(ctx, parent)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return &LockState{Name: name}, nil
	}
	if err != nil {
		return nil, err
	}
	sorted := zookeeper.SortBySeq(children)
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

// List returns the names of the locks that have a node (held, waited for, or an
// empty container not yet reclaimed by ZooKeeper).
func (l *Locks) List(ctx context.Context) ([]string, error) { return kit.ListNames(ctx, l.s, l.dir) }

func newLockMetrics(reg prometheus.Registerer) line.Metrics {
	return line.NewMetrics(reg, line.MetricNames{
		Acquire: line.Metric{Name: "coord_lock_acquire_duration_seconds",
			Help: "Time from an acquire request to its outcome, by result (granted, timeout, cancelled, error)."},
		Held:    line.Metric{Name: "coord_locks_held", Help: "Locks held by leases of this sidecar."},
		Waiting: line.Metric{Name: "coord_lock_acquisitions_in_progress", Help: "Lock acquisitions under way on this sidecar."},
		Watched: line.Metric{Name: "coord_lock_watched",
			Help: "Locks this sidecar follows with one ZooKeeper watch each, however many streams follow them."},
	})
}
