package queue

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Queues are the durable queues of one sidecar, kept under <root>/queues (see
// the package documentation for the layout and the protocols).
type Queues struct {
	s       *zookeeper.Session
	dir     string // <root>/queues
	metrics queueMetrics
	// stop ends the goroutines forwarding the cursors' watches (Close).
	stop     chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	queues map[string]*queueState
	claims map[string]*claimRec // claim id → claim held by a lease of this sidecar
}

// Item is a queue item as taken or claimed.
type Item struct {
	ID          string
	Priority    int
	ContentType string
	Data        []byte
}

// Claim is a claimed item; the claim is held by Lease until acked or released.
type Claim struct {
	ID    string
	Lease string
	Item  Item
}

// QueueState counts a queue's items.
type QueueState struct {
	Name string
	// Length is the number of items waiting, delayed ones included: claimed
	// items excluded.
	Length int
	// Delayed is the number of delayed items not yet moved into their
	// priority (not yet due, or due and not yet moved).
	Delayed int
	// Claimed is the number of items claimed now (on every sidecar).
	Claimed int
}

// QueueItemInfo describes one waiting item.
type QueueItemInfo struct {
	ID       string
	Priority int
	Size     int
}

// New returns the queue recipe over a session; reg (may be nil) receives its
// metrics. Call Close after the Session's Close.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Queues {
	return &Queues{
		s:       s,
		dir:     s.Dir("queues"),
		metrics: newQueueMetrics(reg),
		stop:    make(chan struct{}),
		queues:  map[string]*queueState{},
		claims:  map[string]*claimRec{},
	}
}

// Close stops the goroutines that forward the queues' watches and returns once
// they have ended. Call it after the Session's Close, which ends (and waits
// for) every other goroutine of the queues. Close is idempotent.
func (q *Queues) Close() {
	q.stopOnce.Do(func() { close(q.stop) })
	q.mu.Lock()
	all := make([]*queueState, 0, len(q.queues))
	for _, st := range q.queues {
		all = append(all, st)
	}
	q.mu.Unlock()
	for _, st := range all {
		st.stopDelayed()
		st.watches.Wait()
	}
}

// state returns the sidecar's knowledge of one queue.
func (q *Queues) state(name string) *queueState {
	q.mu.Lock()
	defer q.mu.Unlock()
	st := q.queues[name]
	if st == nil {
		st = newQueueState(q, name)
		q.queues[name] = st
	}
	return st
}

// List returns the names of the queues that have a node, sorted. It reads one
// directory: for listings and status pages, not for a hot path.
func (q *Queues) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, q.s, q.dir)
}

// Take removes and returns the first item (lowest priority number, then oldest),
// waiting at most wait for one (0: look once); nil, nil when there is none. Every
// item is taken by exactly one taker across every sidecar. Take writes nothing
// but the delete of the item it wins and an ephemeral receipt of that win (see
// takeOne), deleted right after (and gone with the session in any case), so a
// caller that goes away leaves nothing behind.
func (q *Queues) Take(ctx context.Context, name string, wait time.Duration) (*Item, error) {
	if err := kit.CheckName("queue", name); err != nil {
		return nil, err
	}
	st := q.state(name)
	var item *Item
	act := func(ctx context.Context, ep *zookeeper.Epoch, r itemRef) (outcome, error) {
		out, it, err := q.takeOne(ctx, ep, name, r)
		item = it
		return out, err
	}
	found, err := q.poll(ctx, st, wait, nil, nil, act)
	if err != nil || !found {
		return nil, err
	}
	return item, nil
}

// poll scans the queue for an item act wins, waiting up to wait for one. ep, when
// not nil, is the only session to use (a claim's lease's); stop ends the wait.
func (q *Queues) poll(ctx context.Context, st *queueState, wait time.Duration, ep *zookeeper.Epoch, stop <-chan struct{}, act actFn) (bool, error) {
	d := kit.NewDeadline(wait)
	defer d.Stop()
	for {
		changed := st.changedCh()
		sessChanged := q.s.Changed()
		found, err := q.scanOnce(ctx, st, ep, act)
		if found {
			return true, nil
		}
		if err != nil {
			retry := errors.Is(err, kit.ErrUnavailable) || (ep == nil && errors.Is(err, kit.ErrSessionLost))
			if retry && ctx.Err() == nil && kit.AwaitSession(ctx, sessChanged, d) {
				continue
			}
			return false, err
		}
		if d.Expired() {
			return false, nil
		}
		select {
		case <-changed:
		case <-sessChanged:
		case <-d.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-stop:
			return false, kit.ErrLeaseEnded
		}
	}
}

// scanOnce scans the queue once under the connected session, which must be ep
// when ep is not nil.
func (q *Queues) scanOnce(ctx context.Context, st *queueState, ep *zookeeper.Epoch, act actFn) (bool, error) {
	cur, err := q.s.Await(ctx)
	if err != nil {
		return false, err
	}
	if ep != nil && cur != ep {
		if ep.IsLost() {
			return false, kit.ErrSessionLost
		}
		return false, kit.ErrUnavailable
	}
	st.ensureClaimsWatch(cur)
	if err := st.moveDue(ctx, cur); err != nil {
		return false, err
	}
	return st.scan(ctx, cur, act)
}

type queueMetrics struct {
	enqueued  prometheus.Counter
	taken     *prometheus.CounterVec
	claims    prometheus.Gauge
	claimEnds *prometheus.CounterVec
	conflicts prometheus.Counter
	listings  prometheus.Counter
	// Delayed items: enqueued through this sidecar, moved by it when due, and
	// known to it now (its listings of delayed/).
	delayedEnqueued prometheus.Counter
	delayedMoved    prometheus.Counter
	delayed         prometheus.Gauge
}

func newQueueMetrics(reg prometheus.Registerer) queueMetrics {
	f := promauto.With(reg)
	return queueMetrics{
		enqueued: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_enqueued_total", Help: "Items enqueued through this sidecar.",
		}),
		taken: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_queue_taken_total", Help: "Items removed from queues through this sidecar, by how (take, ack).",
		}, []string{"how"}),
		claims: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_queue_claims", Help: "Claims held by leases of this sidecar.",
		}),
		claimEnds: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_queue_claim_ends_total", Help: "Claims of this sidecar that ended, by reason (acked, released, lease_ended).",
		}, []string{"reason"}),
		conflicts: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_take_conflicts_total",
			Help: "Takes and claims that found their candidate gone or claimed by someone else and moved on to the next item.",
		}),
		listings: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_bucket_listings_total",
			Help: "Bucket listings made by takers (about one per 1,000 items taken, whatever the depth).",
		}),
		delayedEnqueued: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_delayed_enqueued_total", Help: "Delayed items enqueued through this sidecar (not counted in coord_queue_enqueued_total).",
		}),
		delayedMoved: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_delayed_moved_total", Help: "Delayed items this sidecar moved into their priority when they came due.",
		}),
		delayed: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_queue_delayed_items", Help: "Delayed items not yet moved, in the queues this sidecar watches, as of its last listing of each.",
		}),
	}
}
