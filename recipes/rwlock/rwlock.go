package rwlock

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/line"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
)

// RWLocks are fair read/write locks in the layout of Curator's
// InterProcessReadWriteLock:
//
//	<root>/rwlocks/<name>/_c_<guid>-__READ__<seq>   a reader
//	<root>/rwlocks/<name>/_c_<guid>-__WRIT__<seq>   a writer
//
// ephemeral sequential nodes made in protected mode in one container parent and
// ordered by their sequence suffix. As in Curator, a writer holds the lock when
// its node is first (it watches its immediate predecessor), and a reader holds
// it when no writer's node comes before its own: readers share, a writer
// excludes everyone, and a waiting writer holds back every reader that came
// after it. A waiting reader watches the nearest writer before it (Curator's
// watches the first one; both re-check when it goes, the nearest one wakes
// readers only when their way may be clear). Every grant carries the node's
// creation zxid as its fencing token.
type RWLocks struct {
	s       *zookeeper.Session
	dir     string
	metrics rwlockMetrics
	// handoffs tells a waiter that the writer before it, the head, was let go
	// here.
	handoffs  line.Handoffs
	followers *kit.Followers[*RWLockState]
	// grants dates the holders' since (line.Grants).
	grants line.Grants
}

// The modes of a read/write lock grant.
const (
	ReadMode  = "read"
	WriteMode = "write"
)

// Curator's node infixes (they must be of one length, as Curator sorts them).
const (
	readInfix  = "__READ__"
	writeInfix = "__WRIT__"
)

// RWGrant is a read/write lock held by a lease in one mode: the lease's holding.
// A lease holds a lock in one mode at most.
type RWGrant struct {
	Name  string
	Mode  string
	Lease string
	Owner string
	// FencingToken is the grant's node creation zxid: it increases strictly with
	// every new writer of the lock, and every reader's is above the writers'
	// before it.
	FencingToken int64
	AcquiredAt   time.Time

	rw   *RWLocks
	ep   *zookeeper.Epoch
	node zookeeper.Created
}

// RWReader is one reader holding the lock.
type RWReader struct {
	Owner        string
	FencingToken int64
	// Since is when it was granted: exact for a grant made through this
	// sidecar, else as line.Grants tells.
	Since time.Time
}

// RWLockState is a read/write lock's holders: its writer (nil when none) or its
// readers, and the number of waiters (on every client).
type RWLockState struct {
	Name    string
	Writer  *lock.LockHolder
	Readers []RWReader
	Waiters int
	// Zxid is the newest change of the contenders the state reflects.
	Zxid int64
}

// RWLockKind is the kind of a read/write lock grant's hold on its lease
// (kit.Hold).
const RWLockKind = "rwlock"

const rwlockKind = RWLockKind

// New returns the read/write lock recipe over a session.
func New(s *zookeeper.Session, reg prometheus.Registerer) *RWLocks {
	rw := &RWLocks{s: s, dir: s.Dir("rwlocks"), metrics: newRWLockMetrics(reg)}
	rw.followers = kit.NewFollowers(s, rw.metrics.watched, func(name string) kit.Source[*RWLockState] {
		return &rwlockSource{rw: rw, name: name}
	})
	return rw
}

func (rw *RWLocks) parent(name string) string { return rw.dir + "/" + name }

// Lines is the node under which each read/write lock is a line of contender
// nodes.
func (rw *RWLocks) Lines() string { return rw.dir }

func isWriter(node string) bool { return strings.Contains(node, writeInfix) }

// Acquire takes lock name in mode (ReadMode or WriteMode) for the lease of src
// (asked for once the name and mode are checked), waiting at
// most wait (0: try once). It returns the grant; an RWLockedError (lock.ErrLocked)
// when not granted within wait; kit.ErrInvalidArgument for an unknown mode or
// when the lease holds the lock in the other mode; kit.ErrLeaseEnded,
// kit.ErrSessionLost, kit.ErrUnavailable or ctx's error otherwise. On every
// failure the node it made is deleted before it returns, and an implicit lease
// ends. A lease that holds the lock in mode gets its grant again.
func (rw *RWLocks) Acquire(ctx context.Context, src kit.LeaseSource, name, mode, owner string, wait time.Duration) (*RWGrant, error) {
	if err := kit.CheckName("rwlock", name); err != nil {
		return nil, err
	}
	if mode != ReadMode && mode != WriteMode {
		return nil, fmt.Errorf("mode=%q: a read/write lock is taken in mode read or write: %w", mode, kit.ErrInvalidArgument)
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	rw.metrics.waiting.Inc()
	g, found, err := kit.Acquire(ctx, lease, kit.Hold{Kind: rwlockKind, Name: name},
		func(ctx context.Context, ep *zookeeper.Epoch) (*RWGrant, error) {
			return rw.acquire(ctx, ep, lease, name, mode, owner, wait)
		})
	rw.metrics.waiting.Dec()
	if found {
		if g.Mode != mode {
			return nil, fmt.Errorf("lease %q holds read/write lock %q in %s mode; release it first: %w", lease.ID, name, g.Mode, kit.ErrInvalidArgument)
		}
		return g, nil
	}
	rw.metrics.acquire.WithLabelValues(mode, line.AcquireResult(err, lock.ErrLocked)).Observe(time.Since(start).Seconds())
	return g, err
}

func (rw *RWLocks) acquire(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, name, mode, owner string, wait time.Duration) (*RWGrant, error) {
	parent := rw.parent(name)
	infix := readInfix
	if mode == WriteMode {
		infix = writeInfix
	}
	c, err := ep.CreateProtected(ctx, parent, infix, []byte(owner), true)
	if err != nil {
		return nil, fmt.Errorf("read/write lock %q: %w", name, err)
	}
	rw.handoffs.Enter(c.Path)
	var place line.Place
	if mode == WriteMode {
		place, err = line.AwaitHead(ctx, ep, c, wait, lease.Ending(), &rw.handoffs)
	} else {
		place, err = line.AwaitUnblocked(ctx, ep, c, wait, lease.Ending(), &rw.handoffs, nearestWriter)
	}
	switch {
	case err != nil:
		err = fmt.Errorf("read/write lock %q: %w", name, err)
	case !place.Head:
		locked := &RWLockedError{Name: name, Mode: mode}
		if st, _ := rw.read(ctx, ep, name, nil, &line.NodeCache{}); st != nil {
			locked.Writer, locked.Readers = st.Writer, st.Readers
		}
		err = locked
	case ctx.Err() != nil:
		// The client went away as it was granted: it would never know it holds
		// the lock, so it does not.
		err = fmt.Errorf("read/write lock %q: %w", name, ctx.Err())
	}
	if err != nil {
		ep.CleanupProtected(parent, c.GUID, c.Path)
		rw.handoffs.Left(c.Path)
		return nil, err
	}
	rw.metrics.held.WithLabelValues(mode).Inc()
	at := time.Now()
	rw.grants.Granted(c.Path, at)
	return &RWGrant{Name: name, Mode: mode, Lease: lease.ID, Owner: owner, FencingToken: place.Czxid,
		AcquiredAt: at, rw: rw, ep: ep, node: c}, nil
}

// nearestWriter is a reader's blocker: the nearest writer before it (-1: none,
// the reader holds the lock).
func nearestWriter(order []string, idx int) int {
	for i := idx - 1; i >= 0; i-- {
		if isWriter(order[i]) {
			return i
		}
	}
	return -1
}

// Adopt re-creates lease's grant of read/write lock h.Name from its saved node
// after a restart that resumed the session (a kit.Adopter): the node must be
// the session's own and still hold the lock in its mode, so nobody else was
// granted what excludes it meanwhile: a writer's node heads its line, no
// writer's node comes before a reader's. The mode is the node's infix, the
// fencing token its czxid, as at the grant; the owner its data.
func (rw *RWLocks) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	what := fmt.Sprintf("read/write lock %q", h.Name)
	parent := rw.parent(h.Name)
	node, data, st, order, err := line.Saved(ctx, lease, h, parent, what)
	if err != nil {
		return nil, err
	}
	ep := lease.Epoch()
	self := slices.Index(order, path.Base(node.Path))
	if self < 0 {
		return nil, fmt.Errorf("%s: node %s is not in its line", what, node.Path)
	}
	mode := ReadMode
	if isWriter(order[self]) {
		mode = WriteMode
	}
	switch {
	case mode == WriteMode && self != 0:
		return nil, fmt.Errorf("%s: writer node %s no longer heads its line", what, node.Path)
	case mode == ReadMode && nearestWriter(order, self) >= 0:
		return nil, fmt.Errorf("%s: reader node %s has a writer before it", what, node.Path)
	}
	rw.handoffs.Enter(node.Path)
	rw.metrics.held.WithLabelValues(mode).Inc()
	return &RWGrant{Name: h.Name, Mode: mode, Lease: lease.ID, Owner: string(data), FencingToken: st.Czxid,
		AcquiredAt: time.UnixMilli(st.Ctime), rw: rw, ep: ep, node: node}, nil
}

// HeldNodes is the grant's node: deleted by another hand, the grant is lost.
func (g *RWGrant) HeldNodes() []string { return []string{g.node.Path} }

// Release deletes the grant's node; a writer first hands the head to this
// sidecar's next waiter. It retries through a suspension while the session lives.
func (g *RWGrant) Release(ctx context.Context) error {
	g.rw.metrics.held.WithLabelValues(g.Mode).Dec()
	g.rw.grants.Gone(g.node.Path)
	if g.Mode == WriteMode {
		g.rw.handoffs.LetGo(g.node.Path) // a writer's grant is the head of its line
	}
	err := g.ep.DeleteProtected(ctx, path.Dir(g.node.Path), g.node.GUID, g.node.Path)
	g.rw.handoffs.Left(g.node.Path) // a reader: a writer after it looks at the line again
	return err
}

// Release releases the lock that the lease of src (asked for once the name and
// mode are checked) holds in mode. It returns kit.ErrNotHeld when the lease
// does not hold it in that mode (nothing is changed then). An implicit lease
// ends with it.
func (rw *RWLocks) Release(ctx context.Context, src kit.LeaseSource, name, mode string) error {
	if err := kit.CheckName("rwlock", name); err != nil {
		return err
	}
	if mode != ReadMode && mode != WriteMode {
		return fmt.Errorf("mode=%q: a read/write lock is released in mode read or write: %w", mode, kit.ErrInvalidArgument)
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return err
	}
	return line.Release(ctx, lease, kit.Hold{Kind: rwlockKind, Name: name}, func(g *RWGrant) bool { return g.Mode == mode },
		fmt.Sprintf("read/write lock %q in %s mode", name, mode))
}

// Inspect returns the lock's writer or readers and its waiters.
func (rw *RWLocks) Inspect(ctx context.Context, name string) (*RWLockState, error) {
	return line.Inspect(ctx, rw.s, "rwlock", name, rw.read)
}

// List returns the names of the read/write locks that have a node.
func (rw *RWLocks) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, rw.s, rw.dir)
}

// Follow follows lock name: one children watch per sidecar, however many
// followers. Close the follower when done.
func (rw *RWLocks) Follow(name string) (*kit.Follower[*RWLockState], error) {
	return rw.followers.FollowName("rwlock", name)
}

// read lists the line and reads its holders: the first node when it is a
// writer's, else the readers before the first writer.
func (rw *RWLocks) read(ctx context.Context, ep *zookeeper.Epoch, name string, w *kit.Watches, cache *line.NodeCache) (*RWLockState, error) {
	parent := rw.parent(name)
	children, st, err := line.WatchedChildren(ctx, ep, parent, line.ChildrenPart, w)
	if err != nil {
		return nil, err
	}
	order := zookeeper.SortBySeq(children)
	holders := 0
	for holders < len(order) && !isWriter(order[holders]) {
		holders++
	}
	if holders == 0 && len(order) > 0 {
		holders = 1 // a writer at the head
	}
	infos, err := cache.Read(ctx, ep, parent, order[:holders])
	if err != nil {
		return nil, err
	}
	out := &RWLockState{Name: name, Readers: []RWReader{}, Waiters: len(order) - holders, Zxid: line.Pzxid(st)}
	granted := rw.grants.Read(parent, order[:holders], order[holders:])
	for _, n := range order[:holders] {
		in, ok := infos[n]
		since, known := granted[n]
		if !known {
			since = in.Since
		}
		switch {
		case !ok: // gone meanwhile: the watch reports it
		case isWriter(n):
			out.Writer = &lock.LockHolder{Owner: in.Data, FencingToken: in.Czxid, Since: since}
		default:
			out.Readers = append(out.Readers, RWReader{Owner: in.Data, FencingToken: in.Czxid, Since: since})
		}
	}
	return out, nil
}

// rwlockSource reads a read/write lock for its follower.
type rwlockSource struct {
	rw    *RWLocks
	name  string
	cache line.NodeCache
}

func (s *rwlockSource) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*RWLockState, error) {
	return s.rw.read(ctx, ep, s.name, w, &s.cache)
}

func (s *rwlockSource) Reset() { s.cache.Reset() }

func (s *rwlockSource) Uncertain(last *RWLockState, loaded bool, _ kit.Uncertainty) *RWLockState {
	if loaded {
		return last
	}
	return &RWLockState{Name: s.name, Readers: []RWReader{}}
}

func (s *rwlockSource) Same(a, b *RWLockState) bool {
	if a == nil || b == nil || a.Waiters != b.Waiters || (a.Writer == nil) != (b.Writer == nil) || !slices.Equal(a.Readers, b.Readers) {
		return false
	}
	return a.Writer == nil || *a.Writer == *b.Writer
}

type rwlockMetrics struct {
	acquire *prometheus.HistogramVec
	held    *prometheus.GaugeVec
	waiting prometheus.Gauge
	watched prometheus.Gauge
}

func newRWLockMetrics(reg prometheus.Registerer) rwlockMetrics {
	f := promauto.With(reg)
	return rwlockMetrics{
		acquire: kit.WaitSeconds(f, "coord_rwlock_acquire_duration_seconds",
			"Time from a read/write lock request to its outcome, by mode and result (granted, timeout, cancelled, error).", "mode", "result"),
		held: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "coord_rwlocks_held", Help: "Read/write lock grants held by leases of this sidecar, by mode.",
		}, []string{"mode"}),
		waiting: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_rwlock_acquisitions_in_progress", Help: "Read/write lock requests under way on this sidecar.",
		}),
		watched: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_rwlock_watched", Help: "Read/write locks this sidecar follows with one ZooKeeper watch each.",
		}),
	}
}
