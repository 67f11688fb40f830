package kit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Leases owns every lease of the sidecar. Leases live in the sidecar's memory and
// are bound to the ZooKeeper session under which they were granted: what they hold
// is kept in ephemeral nodes of that session.
type Leases struct {
	s       *zookeeper.Session
	metrics leaseMetrics

	mu       sync.Mutex
	leases   map[string]*Lease
	owned    map[string]int // live leases by Owner (no zero entries)
	watching map[*zookeeper.Epoch]bool
	closed   bool
	// adoptions re-create holds after a restart, by hold kind
	// (RegisterAdoption); onChange is told of every change a successor needs
	// (OnChange).
	adoptions map[string]Adoption
	onChange  atomic.Pointer[func(Change)]
	// watchers are the goroutines that end the leases of a lost session.
	watchers sync.WaitGroup
	// untimed are the implicit leases that have no timer of their own yet
	// (see timerQuantum); sweeper, armed while there is one, gives each its
	// timer.
	untimed map[*Lease]struct{}
	sweeper *time.Timer
	armed   bool
}

// timerQuantum is how long an implicit lease may live without a timer of its
// own. Most implicit leases end within milliseconds (the lock they were made
// for is released), so instead of a timer each (made, then stopped: an
// allocation and two updates of the runtime's timer heap per request), they
// share one: every timerQuantum, while there are any, each implicit lease
// still live gets its own timer, set for its expiry as before. A lease's TTL
// is more than twice the quantum (the HTTP layer's minimum is 1s), so the
// timer it gets still has time to run: it expires when it always did.
const timerQuantum = 250 * time.Millisecond

// Lease is the owner of locks, candidacies, memberships and claims.
//
// A lease ends exactly once, for one reason (Err): revoked (ErrLeaseRevoked), not
// kept alive within TTL (ErrLeaseExpired), or its session lost (ErrSessionLost).
// Ending closes Ending at once, releases everything it holds (for a lost session
// the nodes are already gone), and then closes Done.
type Lease struct {
	// ID is the lease's id: 20 lower-case base32 characters.
	ID string
	// TTL is how long the lease lives without a keepalive.
	TTL time.Duration
	// Implicit is set for a lease made for one acquisition: it ends with the release
	// of what it holds, or with the failure of that acquisition.
	Implicit bool
	// Owner names who made the lease (the HTTP layer puts the name of the
	// bearer token there; "" when it made none). Set by GrantTo, never changed.
	Owner string

	mgr *Leases
	ep  *zookeeper.Epoch

	mu        sync.Mutex
	expiresAt time.Time
	timer     *time.Timer
	pins      int
	holds     holdSet
	lost      lostHolds
	err       error
	// ending and done are made when first asked for (Ending, Done, a second
	// end waiting for the first), else nil; once the lease ends, or has
	// ended and released what it held, a nil one becomes closedChan: a lease
	// acquired and released without anybody waiting on it makes neither.
	ending chan struct{}
	done   chan struct{}
}

// closedChan is the ending or done channel of a lease that had none when it
// ended.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// NewLeases makes the lease registry of a session.
func NewLeases(s *zookeeper.Session, reg prometheus.Registerer) *Leases {
	return &Leases{
		s:        s,
		metrics:  newLeaseMetrics(reg),
		leases:   map[string]*Lease{},
		owned:    map[string]int{},
		watching: map[*zookeeper.Epoch]bool{},
		untimed:  map[*Lease]struct{}{},
	}
}

// Grant makes a lease bound to the current session. It fails with ErrUnavailable
// while the session is not connected.
func (m *Leases) Grant(ttl time.Duration, implicit bool) (*Lease, error) {
	return m.GrantTo(context.Background(), "", ttl, implicit)
}

// GrantTo is Grant for a lease whose Owner is owner. While the session is not
// connected and ctx allows it (zookeeper.WithSuspendWait), it waits for a
// connected session (zookeeper.Session.Await).
func (m *Leases) GrantTo(ctx context.Context, owner string, ttl time.Duration, implicit bool) (*Lease, error) {
	if ttl <= 0 {
		return nil, fmt.Errorf("ttl %s: %w", ttl, ErrInvalidArgument)
	}
	ep, err := m.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	l := &Lease{
		ID: NewID(), TTL: ttl, Implicit: implicit, Owner: owner,
		mgr: m, ep: ep,
		expiresAt: time.Now().Add(ttl),
	}
	deferTimer := implicit && ttl > 2*timerQuantum
	if err := m.register(l, deferTimer); err != nil {
		return nil, err
	}
	if !deferTimer {
		l.mu.Lock()
		l.timer = time.AfterFunc(ttl, l.onTimer)
		l.mu.Unlock()
	}
	m.changed(l.ID)
	return l, nil
}

// sweepUntimed gives every implicit lease still without a timer its own, for
// the rest of its time (see timerQuantum).
func (m *Leases) sweepUntimed() {
	m.mu.Lock()
	m.armed = false
	if m.closed || len(m.untimed) == 0 {
		m.mu.Unlock()
		return
	}
	due := m.untimed
	m.untimed = make(map[*Lease]struct{}, len(due))
	m.mu.Unlock()
	for l := range due {
		l.mu.Lock()
		if l.err == nil && l.timer == nil {
			l.timer = time.AfterFunc(time.Until(l.expiresAt), l.onTimer)
		}
		l.mu.Unlock()
	}
}

// errLeaseLive: register found a live lease with the same id.
var errLeaseLive = errors.New("a lease with this id is live")

// register adds l to the registry and follows its session, unless the
// registry is closed (ErrClosed) or has a lease of that id (errLeaseLive).
// With deferTimer, l waits among the untimed for its timer (sweepUntimed).
func (m *Leases) register(l *Lease, deferTimer bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, live := m.leases[l.ID]; live {
		return errLeaseLive
	}
	m.leases[l.ID] = l
	m.owned[l.Owner]++
	if deferTimer {
		m.untimed[l] = struct{}{}
		if !m.armed {
			m.armed = true
			if m.sweeper == nil {
				m.sweeper = time.AfterFunc(timerQuantum, m.sweepUntimed)
			} else {
				m.sweeper.Reset(timerQuantum)
			}
		}
	}
	if !m.watching[l.ep] {
		m.watching[l.ep] = true
		m.watchers.Add(1)
		go m.watchEpoch(l.ep)
	}
	m.metrics.live.Inc()
	return nil
}

// watchEpoch ends every lease of ep when its session is lost (after Close too:
// the Session marks every epoch lost), and makes each of them lose what it
// holds at every doubt of the session (zookeeper.Epoch.Doubted: a suspension
// that lasted until the session could have expired). The leases live on: the
// session may come back, and they may hold things again under it.
func (m *Leases) watchEpoch(ep *zookeeper.Epoch) {
	defer m.watchers.Done()
	for {
		select {
		case <-ep.Doubted():
			for _, l := range m.of(ep) {
				l.loseAll(doubtReason(ep))
			}
			continue
		case <-ep.Lost():
		}
		break
	}
	m.mu.Lock()
	delete(m.watching, ep)
	m.mu.Unlock()
	for _, l := range m.of(ep) {
		l.end(ErrSessionLost)
	}
}

// of lists the live leases granted under ep.
func (m *Leases) of(ep *zookeeper.Epoch) []*Lease {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Lease
	for _, l := range m.leases {
		if l.ep == ep {
			out = append(out, l)
		}
	}
	return out
}

// Get returns the live lease with that id, or ErrLeaseNotFound.
func (m *Leases) Get(id string) (*Lease, error) {
	m.mu.Lock()
	l, ok := m.leases[id]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("lease %q: %w", id, ErrLeaseNotFound)
	}
	return l, nil
}

// IDs returns the ids of the live leases that keep accepts, sorted.
func (m *Leases) IDs(keep func(*Lease) bool) []string {
	m.mu.Lock()
	ids := make([]string, 0, len(m.leases))
	for id, l := range m.leases {
		if keep(l) {
			ids = append(ids, id)
		}
	}
	m.mu.Unlock()
	slices.Sort(ids)
	return ids
}

// Len returns the number of live leases.
func (m *Leases) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.leases)
}

// LenOf returns the number of live leases whose Owner is owner, without
// walking the leases: the count is kept as leases are granted and end.
func (m *Leases) LenOf(owner string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.owned[owner]
}

// KeepAlive pushes the lease's expiry to now + TTL.
func (m *Leases) KeepAlive(id string) (*Lease, error) {
	l, err := m.Get(id)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return nil, fmt.Errorf("lease %q: %w", id, ErrLeaseNotFound)
	}
	l.expiresAt = time.Now().Add(l.TTL)
	l.mu.Unlock()
	m.changed(l.ID)
	return l, nil
}

// Revoke ends the lease and returns once everything it held is released.
func (m *Leases) Revoke(id string) error {
	l, err := m.Get(id)
	if err != nil {
		return err
	}
	l.end(ErrLeaseRevoked)
	return nil
}

// Close revokes every lease (releasing what they hold) and refuses new ones. The
// Session's Close, called after it, ends the goroutines that follow the epochs;
// Wait waits for them.
func (m *Leases) Close() {
	m.mu.Lock()
	m.closed = true
	if m.sweeper != nil {
		m.sweeper.Stop()
	}
	all := make([]*Lease, 0, len(m.leases))
	for _, l := range m.leases {
		all = append(all, l)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range all {
		wg.Add(1)
		go func() { defer wg.Done(); l.end(ErrLeaseRevoked) }()
	}
	wg.Wait()
}

// Wait returns once the goroutines that follow the leases' sessions have ended:
// call it after the Session's Close. Like Close, it refuses new leases first, so
// that no such goroutine starts while it waits (they start under m.mu, unless
// closed).
func (m *Leases) Wait() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.watchers.Wait()
}

func (l *Lease) onTimer() {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return
	}
	now := time.Now()
	if l.pins > 0 {
		l.expiresAt = now.Add(l.TTL)
	}
	if left := l.expiresAt.Sub(now); left > 0 {
		l.timer.Reset(left)
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.end(ErrLeaseExpired)
}

// end ends the lease for reason; it returns once the lease's holds are released
// (also when another goroutine is ending it). Only the first reason counts.
func (l *Lease) end(reason error) {
	l.mu.Lock()
	if l.err != nil {
		done := l.doneLocked()
		l.mu.Unlock()
		<-done
		return
	}
	l.err = reason
	if l.timer != nil {
		l.timer.Stop()
	}
	holds := l.holds
	l.holds = holdSet{}
	// The acquisitions under way notice Ending and clean up themselves:
	// releaseAll waits for them.
	var settling []chan struct{}
	for _, h := range holds.all() {
		if h.pending {
			settling = append(settling, h.settledChan())
		}
	}
	if l.ending != nil {
		close(l.ending)
	} else {
		l.ending = closedChan
	}
	l.mu.Unlock()

	m := l.mgr
	m.mu.Lock()
	delete(m.leases, l.ID)
	delete(m.untimed, l)
	if m.owned[l.Owner]--; m.owned[l.Owner] == 0 {
		delete(m.owned, l.Owner)
	}
	m.mu.Unlock()
	m.metrics.live.Dec()
	m.metrics.endedBy(reason).Inc()
	m.changed(l.ID)
	if holds.len() > 0 { // (an implicit lease whose hold was released holds nothing)
		l.releaseAll(&holds, settling)
	}
	l.mu.Lock()
	if l.done != nil {
		close(l.done)
	} else {
		l.done = closedChan
	}
	l.mu.Unlock()
}

// doneLocked is Done under l.mu.
func (l *Lease) doneLocked() chan struct{} {
	if l.done == nil {
		l.done = make(chan struct{})
	}
	return l.done
}

// releaseAll releases the holds an ending lease had, and waits for the
// acquisitions under way to settle (settling: their settled channels, taken
// under l.mu as the lease began to end).
func (l *Lease) releaseAll(holds *holdSet, settling []chan struct{}) {
	m := l.mgr
	// After a lost session the releases find nothing to delete and return at once.
	var wg sync.WaitGroup
	for _, h := range holds.all() {
		if h.pending {
			// An acquisition under way notices Ending and cleans up itself: it
			// is waited for below (within an operation's timeout), so that once
			// the lease has ended its waiters' nodes are gone too.
			continue
		}
		l.unwatchNodes(h.v)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), m.s.OpTimeout())
			defer cancel()
			_ = h.v.Release(ctx)
		}()
	}
	wg.Wait()
	if len(settling) == 0 {
		return
	}
	bound, cancel := context.WithTimeout(context.Background(), m.s.OpTimeout())
	defer cancel()
	for _, ch := range settling {
		select {
		case <-ch:
		case <-bound.Done():
		}
	}
}

// EndReason names why a lease ended, as clients see it: "revoked", "expired" or
// "lost", for the lease's Err.
func EndReason(err error) string {
	switch {
	case errors.Is(err, ErrLeaseRevoked):
		return "revoked"
	case errors.Is(err, ErrLeaseExpired):
		return "expired"
	default:
		return "lost"
	}
}

// Ending is closed as soon as the lease starts to end.
func (l *Lease) Ending() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ending == nil {
		l.ending = make(chan struct{})
	}
	return l.ending
}

// Done is closed once the lease has ended and what it held is released.
func (l *Lease) Done() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.doneLocked()
}

// Err is nil while the lease lives, then why it ended: ErrLeaseRevoked,
// ErrLeaseExpired or ErrSessionLost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Epoch is the ZooKeeper session the lease was granted under: what it holds lives
// in ephemeral nodes of that session.
func (l *Lease) Epoch() *zookeeper.Epoch { return l.ep }

// ExpiresAt is when the lease ends unless kept alive (while pinned, now + TTL).
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pins > 0 {
		return time.Now().Add(l.TTL)
	}
	return l.expiresAt
}

// Holds lists what the lease holds, sorted by kind and name.
func (l *Lease) Holds() []Hold {
	l.mu.Lock()
	out := make([]Hold, 0, l.holds.len())
	for h, v := range l.holds.all() {
		if !v.pending {
			out = append(out, h)
		}
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Kind != out[j].Kind {
			return out[i].Kind < out[j].Kind
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Pin keeps the lease from expiring until unpin is called (the keepalive stream,
// a request that waits for an implicit lease); unpin restarts the TTL from that
// moment.
func (l *Lease) Pin() (unpin func()) {
	l.pin() // a successor must know the expiry is moving
	var once sync.Once
	return func() { once.Do(l.unpin) }
}

// pin is Pin for a caller that calls unpin itself, once (no closures).
func (l *Lease) pin() {
	l.mu.Lock()
	l.pins++
	first := l.pins == 1
	l.mu.Unlock()
	if first {
		l.mgr.changed(l.ID)
	}
}

// unpin ends one pin: the TTL restarts from now.
func (l *Lease) unpin() {
	l.mu.Lock()
	l.pins--
	l.expiresAt = time.Now().Add(l.TTL)
	last := l.pins == 0
	l.mu.Unlock()
	if last {
		l.mgr.changed(l.ID)
	}
}

// CheckConnected returns nil while the session the lease was granted under is
// the connected one; otherwise ErrSessionLost (that session is gone, and so is
// everything the lease held) or ErrUnavailable (suspended: try again). Recipes
// check it before writing anything on the lease's behalf.
func (l *Lease) CheckConnected() error {
	if l.ep.Connected() {
		return nil
	}
	if l.ep.IsLost() {
		return ErrSessionLost
	}
	return ErrUnavailable
}

// AwaitConnected is CheckConnected for an operation under ctx: while the
// lease's session is suspended and ctx allows it (zookeeper.WithSuspendWait),
// it waits for the connection to come back, and returns ErrSessionLost if the
// session is lost first, ErrUnavailable if the allowance ends first.
func (l *Lease) AwaitConnected(ctx context.Context) error {
	err := l.ep.AwaitConnected(ctx)
	if errors.Is(err, ErrSessionLost) {
		return ErrSessionLost
	}
	return err
}

// EndImplicit ends an implicit lease that ends up holding nothing (a request
// refused before it acquired anything). It does nothing to an explicit lease.
func (l *Lease) EndImplicit() {
	if l != nil && l.Implicit {
		l.end(ErrLeaseRevoked)
	}
}

type leaseMetrics struct {
	live      prometheus.Gauge
	ended     *prometheus.CounterVec
	holdsLost *prometheus.CounterVec
	// endedRevoked is ended's "revoked" child, looked up once: every implicit
	// lease ends revoked.
	endedRevoked atomic.Pointer[prometheus.Counter]
}

// endedBy is the ended counter of reason's EndReason.
func (m *leaseMetrics) endedBy(reason error) prometheus.Counter {
	if !errors.Is(reason, ErrLeaseRevoked) {
		return m.ended.WithLabelValues(EndReason(reason))
	}
	if c := m.endedRevoked.Load(); c != nil {
		return *c
	}
	c := m.ended.WithLabelValues("revoked")
	m.endedRevoked.Store(&c)
	return c
}

func newLeaseMetrics(reg prometheus.Registerer) leaseMetrics {
	f := promauto.With(reg)
	return leaseMetrics{
		live: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_leases", Help: "Live leases on this sidecar.",
		}),
		ended: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_lease_ends_total", Help: "Leases ended, by reason (revoked, expired, lost).",
		}, []string{"reason"}),
		holdsLost: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_holds_lost_total", Help: "Holds that ended without their release, by kind: their node deleted by another hand than the sidecar's, or their session suspended until it could have expired (2/3 of the session timeout without an answer).",
		}, []string{"kind"}),
	}
}
