package recipes

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Queues are durable ZooKeeper queues: FIFO within a priority (0..99, 0 first),
// exactly one taker per item, items persistent (they outlive their producer and
// every sidecar), and claims for at-least-once processing.
//
// # Layout
//
// The ZooKeeper recipes page keeps a queue as sequential children of one parent and
// takes by listing it. Listing a 200,000-item parent is megabytes per call (above
// the 1 MiB jute.maxbuffer clients enforce) and every take would pay for the whole
// depth. Items are therefore kept in bounded buckets:
//
//	<root>/queues/<name>/p<NN>/b<10 digits>/i<H>-<token>-<seq>   an item (persistent sequential)
//	<root>/queues/<name>/p<NN>/b<10 digits>/i<H>-<token>-<seq>/claim   its claim marker (ephemeral)
//	<root>/queues/<name>/claims/<item id>                         the same claim, indexed (ephemeral; container parent)
//
// Take order is priority, then bucket number, then sequence. An item's data is a
// 2-byte header, the content type, then the payload; H, the header length, is in
// the name so that a listing can report sizes from a Stat; the random token finds
// the item again when the answer to its create is lost with the connection.
//
// # Producers
//
// Only the newest bucket of a priority (the tail) is open, and "open" is its data
// version 0. An enqueue is one transaction: Check(tail, version 0) +
// Create(tail/i…, sequential). Whoever gets back a sequence >= 1000 closes the tail
// and opens the next bucket in one transaction: SetData(tail, version 0→1) +
// Create(next). A producer whose cached tail is stale (closed, or closed, drained
// and deleted) fails its Check as a whole and looks the tail up again, so no item
// is ever written behind items of a newer bucket. Concurrent enqueues of one
// sidecar to one priority are sent together in one transaction (group commit),
// in the order they arrived; each producer's own items stay in its order.
//
// # Takers
//
// A sidecar keeps, per queue and priority, what it learned of the order: the
// sorted names of the head buckets it listed, and whether the last one was
// closed. A take pops the first cached item, reads it (Get) and deletes it; the
// delete decides the one winner, so an item another sidecar took (NoNode) is
// simply skipped. The head bucket is listed again only when the cache runs out,
// about once per 1,000 takes, and a closed bucket found empty is deleted; so a
// take costs two round trips plus 1/1000 of a 1,000-name listing whatever the
// depth. Priorities and empty tails are watched, so a sidecar learns of a new
// item in a higher priority without polling, and a waiting take wakes on it.
//
// # Claims
//
// A claim is Multi(Create(item/claim), Create(claims/<item id>)), both ephemeral
// nodes of the sidecar's session, held by a lease (implicit, from ttl=, when none
// is given). A take's Delete fails on an item that has a child (NotEmpty), so
// claims and takes exclude each other atomically without any extra operation on
// the take path. Ack is Multi(delete both markers, delete the item); release (and
// the end of the claim's lease: revoked, expired, or its session lost) deletes the
// markers, and the item is visible again in its old place, because takers keep
// claimed items in their cache and skip them while claimed. Each sidecar watches
// claims/ to skip items claimed elsewhere without trying them, and to learn of
// releases. A sidecar killed with claims in hand loses no item: its session
// expires on the server, which deletes the markers; the items were never touched.
// Ack and release are answered by the sidecar that holds the claim's lease (as
// leases are); elsewhere the claim is not found.
type Queues struct {
	s       *Session
	dir     string // <root>/queues
	metrics queueMetrics

	mu     sync.Mutex
	queues map[string]*queueState
	claims map[string]*claimRec // claim id → claim held by a lease of this sidecar
}

// ErrClaimNotFound means no claim with that id is held on this sidecar: it was
// acked or released, it ended with its lease, or it was never made here.
var ErrClaimNotFound = errors.New("claim not found")

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
	// Length is the number of items waiting: claimed items excluded.
	Length int
	// Claimed is the number of items claimed now (on every sidecar).
	Claimed int
}

// QueueItemInfo describes one waiting item.
type QueueItemInfo struct {
	ID       string
	Priority int
	Size     int
}

// NewQueues returns the queue recipe over a session.
func NewQueues(s *Session, reg prometheus.Registerer) *Queues {
	return &Queues{
		s:       s,
		dir:     s.Root() + "/queues",
		metrics: newQueueMetrics(reg),
		queues:  map[string]*queueState{},
		claims:  map[string]*claimRec{},
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

// newToken returns 13 random lower-case base32 characters.
func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(idEncoding.EncodeToString(b[:]))
}

// Take removes and returns the first item (lowest priority number, then oldest),
// waiting at most wait for one (0: look once); nil, nil when there is none. Every
// item is taken by exactly one taker across every sidecar. Take creates nothing in
// ZooKeeper, so a caller that goes away leaves nothing behind.
func (q *Queues) Take(ctx context.Context, name string, wait time.Duration) (*Item, error) {
	if err := CheckName("queue", name); err != nil {
		return nil, err
	}
	st := q.state(name)
	var item *Item
	act := func(ctx context.Context, ep *epoch, r itemRef) (outcome, error) {
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
func (q *Queues) poll(ctx context.Context, st *queueState, wait time.Duration, ep *epoch, stop <-chan struct{}, act actFn) (bool, error) {
	d := newDeadline(wait)
	defer d.stop()
	for {
		changed := st.changedCh()
		sessChanged := q.s.Changed()
		cur, err := q.s.current()
		if err == nil && ep != nil && cur != ep {
			if ep.isLost() {
				return false, ErrSessionLost
			}
			err = ErrUnavailable
		}
		if err == nil {
			st.ensureClaimsWatch(cur)
			var found bool
			if found, err = st.scan(ctx, cur, act); err == nil && found {
				return true, nil
			}
		}
		if err != nil {
			retry := errors.Is(err, ErrUnavailable) || (ep == nil && errors.Is(err, ErrSessionLost))
			if retry && ctx.Err() == nil && awaitSession(ctx, sessChanged, d) {
				continue
			}
			return false, err
		}
		if d.expired() {
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
			return false, ErrLeaseEnded
		}
	}
}

type queueMetrics struct {
	enqueued  prometheus.Counter
	taken     *prometheus.CounterVec
	claims    prometheus.Gauge
	claimEnds *prometheus.CounterVec
	conflicts prometheus.Counter
	listings  prometheus.Counter
}

func newQueueMetrics(reg prometheus.Registerer) queueMetrics {
	m := queueMetrics{
		enqueued: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_enqueued_total", Help: "Items enqueued through this sidecar.",
		}),
		taken: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_queue_taken_total", Help: "Items removed from queues through this sidecar, by how (take, ack).",
		}, []string{"how"}),
		claims: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_queue_claims", Help: "Claims held by leases of this sidecar.",
		}),
		claimEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_queue_claim_ends_total", Help: "Claims of this sidecar that ended, by reason (acked, released, lease_ended).",
		}, []string{"reason"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_take_conflicts_total",
			Help: "Takes and claims that found their candidate gone or claimed by someone else and moved on to the next item.",
		}),
		listings: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_queue_bucket_listings_total",
			Help: "Bucket listings made by takers (about one per 1,000 items taken, whatever the depth).",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.enqueued, m.taken, m.claims, m.claimEnds, m.conflicts, m.listings)
	}
	return m
}
