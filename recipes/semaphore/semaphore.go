package semaphore

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/line"
)

// Semaphores are counting semaphores in the layout and with the algorithm of
// Curator's InterProcessSemaphoreV2, so Curator processes and the sidecar share
// one semaphore:
//
//	<root>/semaphores/<name>/locks/_c_<guid>-lock-<seq>    an internal mutex (InterProcessMutex)
//	<root>/semaphores/<name>/leases/_c_<guid>-lease-<seq>  one node per permit held
//
// Both are ephemeral sequential nodes made in protected mode under container
// parents. A permit is taken by whoever holds the internal mutex: it creates its
// lease node and holds a permit once the leases number at most max (its own
// included), waiting for releases while it keeps the mutex; then it lets the
// mutex go. Waiters queue fairly on the mutex, each watching its predecessor
// there; only the mutex's holder waits on the leases.
//
// Requests per uncontended permit: Curator sends 7 (create and list under
// locks, create the lease, list the leases with a watch, remove that watch,
// delete the mutex node; the release deletes the lease). The sidecar sends 4:
// its creates are stamped (the parent's stat comes back in the create's own
// transaction), so a mutex node alone under locks holds the mutex without a
// listing and the lease's create tells the number of leases without one; no
// watch is set, so none is removed.
//
// Differences that Curator processes cannot tell: the mutex holder whose lease
// would make one too many deletes it again and waits, without a lease, until
// fewer than max remain (so the holders shown are the permits held, and a wait
// that ends leaves nothing); and its wait on the leases is this sidecar's one
// follower of the semaphore (one children watch, whatever the number of
// waiters and streams), not a watch of its own.
//
// Every party gives the same max, and the sidecar holds callers to it: it
// records its max in the data of its own lease nodes (see leaseData), and an
// acquire whose max differs from the one its oldest holder recorded is refused
// (MaxMismatchError). Curator records no max (its lease node's data is its
// host's address, or what the application set), so a Curator holder is never
// a max to differ from: Curator processes go on as before, each with the max
// it was given. The record is in the lease nodes, not in a node of its own,
// because it must end with the holders (a semaphore whose holders all left
// takes any max again) and cost no request of its own.
type Semaphores struct {
	s       *zookeeper.Session
	dir     string
	metrics line.Metrics
	// handoffs passes the internal mutex to this sidecar's next waiter.
	handoffs  line.Handoffs
	followers *kit.Followers[*SemaphoreState]
}

// Permit is a permit held by a lease: the lease's holding. A lease holds at
// most one permit of a semaphore.
type Permit struct {
	Name string
	// Permit names the permit: its lease node's name without the protected
	// prefix ("<guid>-lease-<seq>").
	Permit     string
	Lease      string
	Owner      string
	Max        int
	AcquiredAt time.Time

	sems *Semaphores
	ep   *zookeeper.Epoch
	node zookeeper.Created
}

// SemaphoreHolder is one permit as anyone can see it.
type SemaphoreHolder struct {
	Permit string
	Owner  string
	Since  time.Time
}

// SemaphoreState is a semaphore's holders (in the order they were granted) and
// the number of waiters (contenders for its internal mutex, on every client).
type SemaphoreState struct {
	Name    string
	Holders []SemaphoreHolder
	Waiters int
	// Zxid is the newest change of the leases the state reflects.
	Zxid int64
}

// SemaphoreKind is the kind of a permit's hold on its lease (kit.Hold).
const SemaphoreKind = "semaphore"

const semaphoreKind = SemaphoreKind

// New returns the semaphore recipe over a session.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Semaphores {
	m := &Semaphores{s: s, dir: s.Dir("semaphores"), metrics: newSemaphoreMetrics(reg)}
	m.followers = kit.NewFollowers(s, m.metrics.Watched, func(name string) kit.Source[*SemaphoreState] {
		return &semaphoreSource{m: m, name: name}
	})
	return m
}

func (m *Semaphores) parent(name string) string { return m.dir + "/" + name }

// Lines is the node under which each semaphore has its lines of contender
// nodes, Parts names them: its internal mutex and its leases.
func (m *Semaphores) Lines() string { return m.dir }

// Parts names the lines of a semaphore, children of its node: the internal
// mutex (where requests wait) and the leases (the permits).
func (m *Semaphores) Parts() []string { return []string{mutexPart, leasesPart} }

// permitName is a lease node's permit id.
func permitName(node string) string { return strings.TrimPrefix(node, "_c_") }

// Acquire takes a permit of semaphore name for the lease of src (asked for
// once the name and max are checked), max permits at most being
// held at once, waiting at most wait (0: try once). It returns the permit; a
// SemaphoreFullError (ErrSemaphoreFull) when none is granted within wait; a
// MaxMismatchError (ErrMaxMismatch) when max is not the semaphore's (the max
// its oldest holder recorded; a lease that holds a permit of it asking again
// with another max included); kit.ErrInvalidArgument when max < 1; kit.ErrLeaseEnded, kit.ErrSessionLost,
// kit.ErrUnavailable or ctx's error otherwise. On every failure the nodes it
// made are deleted before it returns, and an implicit lease ends. A lease that
// holds a permit of the semaphore gets that permit again.
func (m *Semaphores) Acquire(ctx context.Context, src kit.LeaseSource, name, owner string, max int, wait time.Duration) (*Permit, error) {
	if err := kit.CheckName("semaphore", name); err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, fmt.Errorf("max=%d: a semaphore has at least one permit: %w", max, kit.ErrInvalidArgument)
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	m.metrics.Waiting.Inc()
	p, found, err := kit.Acquire(ctx, lease, kit.Hold{Kind: semaphoreKind, Name: name},
		func(ctx context.Context, ep *zookeeper.Epoch) (*Permit, error) {
			return m.acquire(ctx, ep, lease, name, owner, max, wait)
		})
	m.metrics.Waiting.Dec()
	if found && p.Max != max {
		return nil, &MaxMismatchError{Name: name, Max: p.Max}
	}
	if !found {
		m.metrics.Acquire.WithLabelValues(line.AcquireResult(err, ErrSemaphoreFull)).Observe(time.Since(start).Seconds())
	}
	return p, err
}

// acquire takes the internal mutex, then a lease under it, and lets the mutex go.
func (m *Semaphores) acquire(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, name, owner string, max int, wait time.Duration) (*Permit, error) {
	deadline := time.Now().Add(wait)
	locks := m.parent(name) + "/locks"
	mu, err := ep.CreateProtected(ctx, locks, "lock-", nil, true)
	if err != nil {
		return nil, fmt.Errorf("semaphore %q: %w", name, err)
	}
	m.handoffs.Enter(mu.Path)
	place, err := line.AwaitHead(ctx, ep, mu, wait, lease.Ending(), &m.handoffs)
	var node zookeeper.Created
	if err == nil && place.Head {
		node, err = m.takeLease(ctx, ep, lease, name, owner, max, time.Until(deadline))
	}
	if place.Head {
		m.handoffs.LetGo(mu.Path)
	}
	ep.CleanupProtected(locks, mu.GUID, mu.Path)
	m.handoffs.Left(mu.Path)
	switch {
	case err == nil && node.Path == "":
		st, _ := m.read(ctx, ep, name, nil, &line.NodeCache{})
		err = &SemaphoreFullError{Name: name}
		if st != nil {
			err = &SemaphoreFullError{Name: name, Holders: st.Holders}
		}
	case err == nil && ctx.Err() != nil:
		// The client went away as it was granted: it would never know it holds
		// a permit, so it does not.
		ep.CleanupProtected(path.Dir(node.Path), node.GUID, node.Path)
		err = ctx.Err()
	}
	if err != nil {
		if !errors.Is(err, ErrSemaphoreFull) && !errors.Is(err, ErrMaxMismatch) {
			err = fmt.Errorf("semaphore %q: %w", name, err)
		}
		return nil, err
	}
	m.metrics.Held.Inc()
	return &Permit{Name: name, Permit: permitName(path.Base(node.Path)), Lease: lease.ID, Owner: owner, Max: max,
		AcquiredAt: time.Now(), sems: m, ep: ep, node: node}, nil
}

// takeLease runs while the internal mutex is held: it creates the lease node and
// keeps it when the leases then number at most max and the holders' max is max
// (admit); otherwise it deletes it and, when only the count was too high,
// waits, up to wait, until fewer than max remain, and tries again. A zero
// Created (no error) means the wait ended first.
func (m *Semaphores) takeLease(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, name, owner string, max int, wait time.Duration) (zookeeper.Created, error) {
	leases := m.parent(name) + "/leases"
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var f *kit.Follower[*SemaphoreState]
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		c, err := ep.CreateProtected(ctx, leases, "lease-", leaseData(owner, max), true)
		if err != nil {
			return zookeeper.Created{}, err
		}
		count, seen, err := m.admit(ctx, ep, name, leases, c, max)
		if err != nil {
			ep.CleanupProtected(leases, c.GUID, c.Path)
			return zookeeper.Created{}, err
		}
		if count <= max {
			return c, nil
		}
		// One too many: wait without a lease, so that nothing is overcounted
		// and a wait that ends leaves nothing behind.
		ep.CleanupProtected(leases, c.GUID, c.Path)
		if wait <= 0 {
			return zookeeper.Created{}, nil
		}
		if f == nil {
			f = m.followers.Follow(name)
		}
		if retry, err := awaitFewer(ctx, ep, lease, f, timer, seen, max); !retry {
			return zookeeper.Created{}, err
		}
	}
}

// awaitFewer waits, while takeLease holds the internal mutex, until the
// semaphore's state read after seen has fewer than max holders: retry is
// true then. A state read after the attempt (its zxid at least the create's)
// with fewer than max holders is current: nobody else adds a lease while this
// waiter holds the mutex. Retry is false when the wait's timer fires (no
// error), the context ends, the lease ends or the session is lost.
func awaitFewer(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, f *kit.Follower[*SemaphoreState], timer *time.Timer, seen int64, max int) (retry bool, err error) {
	for {
		changed := f.Changed()
		if st, loaded := f.State(); loaded && st.Zxid > seen && len(st.Holders) < max {
			return true, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-lease.Ending():
			return false, kit.ErrLeaseEnded
		case <-ep.Lost():
			return false, zookeeper.ErrSessionLost
		}
	}
}

// admit runs while the internal mutex is held, just after the lease node c was
// created: it returns the number of leases (c included) and the zxid that
// number is current at, or a MaxMismatchError when the oldest other lease that
// records a max records another one. The check runs under the mutex, so that
// of two acquirers with different max only the first is admitted: the second
// sees the first's lease. A lease alone costs no request here.
func (m *Semaphores) admit(ctx context.Context, ep *zookeeper.Epoch, name, leases string, c zookeeper.Created, max int) (count int, seen int64, err error) {
	count, seen = c.Siblings, c.Czxid
	var children []string
	// Unstamped (another's parent), count by listing; with other leases, list
	// them to find their max.
	if c.Czxid == 0 || count > 1 {
		var st *zookeeper.Stat
		if children, st, err = ep.Children(ctx, leases); err != nil {
			return 0, 0, err
		}
		children = zookeeper.SortBySeq(children)
		if c.Czxid == 0 {
			count, seen = len(children), line.Pzxid(st)
		}
	}
	if count <= 1 {
		return count, seen, nil
	}
	held, err := heldMax(ctx, ep, leases, path.Base(c.Path), children)
	if err != nil {
		return 0, 0, err
	}
	if held != 0 && held != max {
		return 0, 0, &MaxMismatchError{Name: name, Max: held}
	}
	return count, seen, nil
}

// heldMax returns the max recorded by the oldest of the leases names (in
// sequence order) that records one, self left out; 0 when none does. It reads
// them one after the other and stops at the first with a max: the sidecar's
// holders all record the same one, Curator's none.
func heldMax(ctx context.Context, ep *zookeeper.Epoch, leases, self string, names []string) (int, error) {
	for _, n := range names {
		if n == self {
			continue
		}
		data, _, err := ep.Get(ctx, leases+"/"+n)
		if errors.Is(err, zookeeper.ErrNoNode) {
			continue // released meanwhile
		}
		if err != nil {
			return 0, err
		}
		if _, max := parseLeaseData(string(data)); max > 0 {
			return max, nil
		}
	}
	return 0, nil
}

// maxMark separates the owner from the max in a lease node's data.
const maxMark = "\x00max="

// leaseData is the data of the sidecar's lease node: the owner, a NUL and
// "max=<max>". A Curator process that reads a lease's data sees the owner
// first; Curator's own lease nodes never end so (its data is an address or the
// application's bytes), so they record no max.
func leaseData(owner string, max int) []byte {
	return []byte(owner + maxMark + strconv.Itoa(max))
}

// parseLeaseData returns a lease node's owner and its recorded max (0 when it
// records none: the data is then the owner as it is). The mark is looked for
// last, so an owner that contains it is still read back whole.
func parseLeaseData(data string) (owner string, max int) {
	i := strings.LastIndex(data, maxMark)
	if i < 0 {
		return data, 0
	}
	n, err := strconv.Atoi(data[i+len(maxMark):])
	if err != nil || n < 1 {
		return data, 0
	}
	return data[:i], n
}

// Adopt re-creates lease's permit of semaphore h.Name from its saved lease node
// after a restart that resumed the session (a kit.Adopter): the node must be
// the session's own and record the max it was granted under (every lease node
// the sidecar makes does). A permit, once admitted, stands while its node
// does: nobody else was granted it meanwhile. The permit id is the node's
// name, as at the grant; the owner and max its data.
func (m *Semaphores) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	what := fmt.Sprintf("semaphore %q", h.Name)
	node, data, st, err := kit.ProtectedNode(ctx, lease, h, m.parent(h.Name)+"/"+leasesPart, what)
	if err != nil {
		return nil, err
	}
	owner, max := parseLeaseData(string(data))
	if max == 0 {
		return nil, fmt.Errorf("%s: node %s records no max", what, node.Path)
	}
	m.metrics.Held.Inc()
	return &Permit{Name: h.Name, Permit: permitName(path.Base(node.Path)), Lease: lease.ID, Owner: owner, Max: max,
		AcquiredAt: time.UnixMilli(st.Ctime), sems: m, ep: lease.Epoch(), node: node}, nil
}

// HeldNodes is the permit's lease node: deleted by another hand, the permit
// is lost.
func (p *Permit) HeldNodes() []string { return []string{p.node.Path} }

// Release deletes the permit's lease node; it retries through a suspension while
// the session lives.
func (p *Permit) Release(ctx context.Context) error {
	p.sems.metrics.Held.Dec()
	return p.ep.DeleteProtected(ctx, path.Dir(p.node.Path), p.node.GUID, p.node.Path)
}

// Release releases the permit the lease of src holds (asked for once the
// semaphore's and the permit's names are checked), deleting its lease node. It
// returns kit.ErrNotHeld when the lease holds no permit of that name (nothing
// is changed then). An implicit lease ends with it.
func (m *Semaphores) Release(ctx context.Context, src kit.LeaseSource, name, permit string) error {
	if err := kit.CheckName("semaphore", name); err != nil {
		return err
	}
	if err := kit.CheckName("permit", permit); err != nil {
		return err
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return err
	}
	return line.Release(ctx, lease, kit.Hold{Kind: semaphoreKind, Name: name}, func(p *Permit) bool { return p.Permit == permit },
		fmt.Sprintf("permit %q of semaphore %q", permit, name))
}

// Inspect returns the semaphore's holders and waiters (on every client).
func (m *Semaphores) Inspect(ctx context.Context, name string) (*SemaphoreState, error) {
	return line.Inspect(ctx, m.s, "semaphore", name, m.read)
}

// List returns the names of the semaphores that have a node.
func (m *Semaphores) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, m.s, m.dir)
}

// Follow follows semaphore name: one children watch on its leases and one on its
// internal mutex per sidecar, however many followers (streams, the overview,
// the waiter that holds the mutex). Close the follower when done.
func (m *Semaphores) Follow(name string) (*kit.Follower[*SemaphoreState], error) {
	return m.followers.FollowName("semaphore", name)
}

const (
	leasesPart = "leases"
	mutexPart  = "locks"
)

// read lists the leases and the internal mutex's contenders (together) and
// reads the leases' data (the cache's unknown ones), watching through w.
func (m *Semaphores) read(ctx context.Context, ep *zookeeper.Epoch, name string, w *kit.Watches, cache *line.NodeCache) (*SemaphoreState, error) {
	parent := m.parent(name)
	var leases, locks []string
	var lst *zookeeper.Stat
	err := zookeeper.Parallel(func() error {
		var err error
		leases, lst, err = line.WatchedChildren(ctx, ep, parent+"/leases", leasesPart, w)
		return err
	}, func() error {
		var err error
		locks, _, err = line.WatchedChildren(ctx, ep, parent+"/locks", mutexPart, w)
		return err
	})
	if err != nil {
		return nil, err
	}
	leases = zookeeper.SortBySeq(leases)
	infos, err := cache.Read(ctx, ep, parent+"/leases", leases)
	if err != nil {
		return nil, err
	}
	st := &SemaphoreState{Name: name, Holders: []SemaphoreHolder{}, Waiters: len(zookeeper.SortBySeq(locks)), Zxid: line.Pzxid(lst)}
	for _, n := range leases {
		if in, ok := infos[n]; ok {
			owner, _ := parseLeaseData(in.Data)
			st.Holders = append(st.Holders, SemaphoreHolder{Permit: permitName(n), Owner: owner, Since: in.Since})
		}
	}
	return st, nil
}

// semaphoreSource reads a semaphore for its follower.
type semaphoreSource struct {
	m     *Semaphores
	name  string
	cache line.NodeCache
}

func (s *semaphoreSource) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*SemaphoreState, error) {
	return s.m.read(ctx, ep, s.name, w, &s.cache)
}

func (s *semaphoreSource) Reset() { s.cache.Reset() }

func (s *semaphoreSource) Uncertain(last *SemaphoreState, loaded bool, _ kit.Uncertainty) *SemaphoreState {
	if loaded {
		return last
	}
	return &SemaphoreState{Name: s.name, Holders: []SemaphoreHolder{}}
}

func (s *semaphoreSource) Same(a, b *SemaphoreState) bool {
	if a == nil || b == nil || a.Waiters != b.Waiters || len(a.Holders) != len(b.Holders) {
		return false
	}
	for i := range a.Holders {
		if a.Holders[i] != b.Holders[i] {
			return false
		}
	}
	return true
}

func newSemaphoreMetrics(reg prometheus.Registerer) line.Metrics {
	return line.NewMetrics(reg, line.MetricNames{
		Acquire: line.Metric{Name: "coord_semaphore_acquire_duration_seconds",
			Help: "Time from a permit request to its outcome, by result (granted, timeout, cancelled, error)."},
		Held:    line.Metric{Name: "coord_semaphore_permits_held", Help: "Semaphore permits held by leases of this sidecar."},
		Waiting: line.Metric{Name: "coord_semaphore_acquisitions_in_progress", Help: "Permit requests under way on this sidecar."},
		Watched: line.Metric{Name: "coord_semaphore_watched",
			Help: "Semaphores this sidecar follows (one watch on the leases each), however many waiters and streams follow them."},
	})
}
