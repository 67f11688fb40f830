package counter

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Counters are the counters of one sidecar (see the package doc).
type Counters struct {
	s       *zookeeper.Session
	dir     string
	markDir string // the write markers' parent (marker.go)
	metrics metrics
	// marked holds the marker paths known to exist (string -> true).
	marked sync.Map

	followers *kit.Followers[*State]

	mu sync.Mutex
	// adders combine the adds under way to one counter on this sidecar.
	adders map[string]*adder
	// known is what this sidecar last wrote to its counters (known.go).
	known knownValues
}

// State is a counter as one read saw it.
type State struct {
	Name  string
	Value int64
	// Exists is false for a counter never set (Value 0).
	Exists bool
	// Mzxid is the zxid of the value's last write (0 when absent).
	Mzxid int64
	// Corrupt is set when the node's data is not a counter (Value 0).
	Corrupt bool
	// Unknown is set by a follower before its first read succeeded.
	Unknown bool
}

// adder is one counter's combiner, shared by the adds under way to it.
type adder struct {
	commit *zookeeper.GroupCommit[*addReq]
	refs   int // under Counters.mu
}

// addReq is one add waiting for its compare-and-set.
type addReq struct {
	// allow carries the request's allowance to wait through a suspension
	// (zookeeper.WithSuspendWait) to the shared compare-and-set.
	allow context.Context
	delta int64
	value int64
	err   error
	done  chan struct{}
}

// maxBatch bounds the adds one compare-and-set carries.
const maxBatch = 4096

// New returns the counters over a session.
func New(s *zookeeper.Session, reg prometheus.Registerer) *Counters {
	c := &Counters{s: s, dir: s.Dir("counters"), markDir: s.Dir(markerDir), metrics: newMetrics(reg), adders: map[string]*adder{}}
	c.known = knownValues{s: s, dir: c.dir}
	c.followers = kit.NewFollowers(s, c.metrics.followed, func(name string) kit.Source[*State] {
		return &source{c: c, name: name}
	})
	return c
}

func (c *Counters) node(name string) string { return c.dir + "/" + name }

// Add adds delta to the counter atomically and returns its value right after
// this add. Concurrent adds to one counter on this sidecar share one
// compare-and-set. An *OverflowError when the sum leaves the int64 range (the
// counter is unchanged by this add); ErrCorrupt when the node is not a counter;
// ErrUnavailable when ZooKeeper did not answer: an add whose answer was lost
// with its connection is checked once the connection is back, within ctx's
// allowance to wait through a suspension (zookeeper.SetChecked), and answered
// when it can be told whether it was applied; otherwise the error says the
// outcome is unknown (zookeeper.IsOutcomeUnknown).
func (c *Counters) Add(ctx context.Context, name string, delta int64) (int64, error) {
	if err := kit.CheckName("counter", name); err != nil {
		return 0, err
	}
	// The shared compare-and-set runs under a context of its own: the wait
	// through a suspension that ctx may allow is waited here.
	if _, err := c.s.Await(ctx); err != nil {
		return 0, err
	}
	a := c.adder(name)
	defer c.release(name, a)
	r := &addReq{allow: ctx, delta: delta, done: make(chan struct{})}
	a.commit.Submit(r)
	select {
	case <-r.done:
	case <-ctx.Done():
		if a.commit.Withdraw(r) {
			return 0, fmt.Errorf("%w: %w", zookeeper.ErrUnavailable, ctx.Err())
		}
		<-r.done // in a compare-and-set already: its answer comes within the call's timeout and the wait allowed
	}
	return r.value, r.err
}

func (c *Counters) adder(name string) *adder {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.adders[name]
	if a == nil {
		a = &adder{}
		a.commit = &zookeeper.GroupCommit[*addReq]{
			MaxFlushes: 1, // one compare-and-set at a time: what arrives meanwhile joins the next
			Take:       func(pending []*addReq) int { return min(len(pending), maxBatch) },
			Send:       func(batch []*addReq) { c.addBatch(name, batch) },
			Owner:      c.s,
		}
		c.adders[name] = a
	}
	a.refs++
	return a
}

func (c *Counters) release(name string, a *adder) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a.refs--
	if a.refs == 0 && c.adders[name] == a {
		delete(c.adders, name)
	}
}

// addBatch applies a batch of adds in one compare-and-set and answers each.
func (c *Counters) addBatch(name string, batch []*addReq) {
	// The requests' allowance to wait through a suspension goes with the
	// compare-and-set: a write whose answer is lost is checked once the
	// connection is back (zookeeper.SetChecked), within it.
	ctx, wait := context.Background(), time.Duration(0)
	for _, r := range batch {
		if cctx, w := zookeeper.CarrySuspendWait(context.Background(), r.allow); w > wait {
			ctx, wait = cctx, w
		}
	}
	ctx, cancel := context.WithTimeout(ctx, c.s.OpTimeout()+wait)
	defer cancel()
	err := c.update(ctx, name, func(cur int64) (int64, bool, error) {
		v, wrote := cur, false
		for _, r := range batch {
			r.err = nil
			next, ok := add(v, r.delta)
			if !ok {
				r.err = &OverflowError{Name: name, Value: v, Add: r.delta}
				continue
			}
			v, r.value, wrote = next, next, true
		}
		return v, wrote, nil
	})
	if err == nil {
		c.metrics.batch.Observe(float64(len(batch)))
	}
	for _, r := range batch {
		if err != nil {
			r.err = err
		}
		close(r.done)
	}
}

// add is a + b, and false when it leaves the int64 range.
func add(a, b int64) (int64, bool) {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		return 0, false
	}
	return s, true
}

// update reads the counter and writes what next makes of it (when it says to
// write), compare-and-set on the node's version, until a write is not refused.
// The first attempt writes on the value this sidecar knows, when it knows it
// (known.go), without reading.
func (c *Counters) update(ctx context.Context, name string, next func(cur int64) (int64, bool, error)) error {
	ep, err := c.s.Await(ctx)
	if err != nil {
		return err
	}
	if done, err := c.updateKnown(ctx, ep, name, next); done || err != nil {
		return err
	}
	for {
		if done, err := c.readAndUpdate(ctx, name, next); done || err != nil {
			return err
		}
	}
}

// updateKnown is update's first attempt, a compare-and-set on the value this
// sidecar knows (known.go) without reading it. Done when it wrote; not done
// (and no error) when nothing is known, next refuses the known value or
// writes nothing, or the counter changed since: update then reads it. What
// is known is only ever the base of a compare-and-set, never an answer.
func (c *Counters) updateKnown(ctx context.Context, ep *zookeeper.Epoch, name string, next func(cur int64) (int64, bool, error)) (bool, error) {
	k, ok := c.known.take(name, ep)
	if !ok {
		return false, nil
	}
	v, write, err := next(k.value)
	if err != nil || !write {
		return false, nil
	}
	st, err := c.cas(ctx, ep, name, v, k.version, true)
	if errors.Is(err, zookeeper.ErrBadVersion) || errors.Is(err, zookeeper.ErrNoNode) {
		c.metrics.conflicts.Inc() // changed since: read it
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.metrics.unread.Inc()
	c.rememberWrite(name, ep, k.arming, v, st)
	return true, nil
}

// readAndUpdate reads the counter and writes what next makes of it. Done when
// it wrote or next says not to write; not done (and no error) when another
// writer came first, so that the caller reads again.
func (c *Counters) readAndUpdate(ctx context.Context, name string, next func(cur int64) (int64, bool, error)) (bool, error) {
	ep, err := c.s.Await(ctx)
	if err != nil {
		return false, err
	}
	cur, version, exists, err := c.read(ctx, ep, name)
	if err != nil {
		return false, err
	}
	v, write, err := next(cur)
	if err != nil || !write {
		return true, err
	}
	arming := c.known.watching(ep) // before the write is sent
	wrote, err := c.cas(ctx, ep, name, v, version, exists)
	if errors.Is(err, zookeeper.ErrBadVersion) || errors.Is(err, zookeeper.ErrNoNode) || errors.Is(err, zookeeper.ErrNodeExists) {
		c.metrics.conflicts.Inc()
		return false, nil // another writer came first: read again
	}
	if err != nil {
		return false, err
	}
	c.rememberWrite(name, ep, arming, v, wrote)
	return true, nil
}

// read reads counter name's value and its node's version; a counter without a
// node is 0 and exists is false (version 0).
func (c *Counters) read(ctx context.Context, ep *zookeeper.Epoch, name string) (cur int64, version int32, exists bool, err error) {
	data, st, err := ep.Get(ctx, c.node(name))
	if errors.Is(err, zookeeper.ErrNoNode) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	cur, err = decode(name, data)
	return cur, st.Version, true, err
}

// rememberWrite keeps what was written as known (known.go); a write adopted
// after its answer was lost (no stat) is forgotten: the next one reads first.
func (c *Counters) rememberWrite(name string, ep *zookeeper.Epoch, arming uint64, v int64, st *zookeeper.Stat) {
	if st == nil {
		c.known.forget(name)
		return
	}
	c.known.remember(name, ep, arming, v, st)
}

// Set sets the counter to value, if its value is *expect when expect is not nil
// (a counter never set is 0). A *MismatchError with the current value when it
// is not.
func (c *Counters) Set(ctx context.Context, name string, value int64, expect *int64) (int64, error) {
	if err := kit.CheckName("counter", name); err != nil {
		return 0, err
	}
	err := c.update(ctx, name, func(cur int64) (int64, bool, error) {
		if expect != nil && cur != *expect {
			return 0, false, &MismatchError{Name: name, Value: cur}
		}
		return value, true, nil
	})
	return value, err
}

// Delete removes the counter's node, whatever its value (a counter read after
// it is 0 again). ErrNotFound when it has no node; nothing else is touched.
// Adds under way on this sidecar or another may make it again right after.
func (c *Counters) Delete(ctx context.Context, name string) error {
	if err := kit.CheckName("counter", name); err != nil {
		return err
	}
	ep, err := c.s.Await(ctx)
	if err != nil {
		return err
	}
	err = ep.DeleteChecked(ctx, c.node(name), -1)
	c.known.forget(name) // a compare-and-set on it reads first
	if errors.Is(err, zookeeper.ErrNoNode) {
		return fmt.Errorf("counter %q: %w", name, ErrNotFound)
	}
	return err
}

// Get reads the counter (0 when never set).
func (c *Counters) Get(ctx context.Context, name string) (*State, error) {
	if err := kit.CheckName("counter", name); err != nil {
		return nil, err
	}
	ep, err := c.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	data, st, err := ep.Get(ctx, c.node(name))
	if errors.Is(err, zookeeper.ErrNoNode) {
		return &State{Name: name}, nil
	}
	if err != nil {
		return nil, err
	}
	return state(name, data, st)
}

// state is what a read of an existing counter node shows.
func state(name string, data []byte, st *zookeeper.Stat) (*State, error) {
	v, err := decode(name, data)
	if err != nil {
		return &State{Name: name, Exists: true, Mzxid: st.Mzxid, Corrupt: true}, err
	}
	return &State{Name: name, Value: v, Exists: true, Mzxid: st.Mzxid}, nil
}

// List returns the names of the counters that have a node, sorted.
func (c *Counters) List(ctx context.Context) ([]string, error) { return kit.ListNames(ctx, c.s, c.dir) }

// Follow follows a counter: however many followers it has on this sidecar, one
// watch serves them all. Close the follower when done.
func (c *Counters) Follow(name string) (*kit.Follower[*State], error) {
	return c.followers.FollowName("counter", name)
}

// decode reads DistributedAtomicLong's layout: 8 bytes big-endian; no data is 0.
func decode(name string, data []byte) (int64, error) {
	switch len(data) {
	case 0:
		return 0, nil
	case 8:
		return int64(binary.BigEndian.Uint64(data)), nil
	}
	return 0, fmt.Errorf("counter %q holds %d bytes, not 8: %w", name, len(data), ErrCorrupt)
}

func encode(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// source reads one counter for its follower.
type source struct {
	c    *Counters
	name string
}

func (s *source) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*State, error) {
	data, st, ok, err := kit.ReadNode(ctx, ep, w, "value", s.c.node(s.name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return &State{Name: s.name}, nil
	}
	v, _ := state(s.name, data, st) // a corrupt counter is shown as such
	return v, nil
}

func (s *source) Reset() {}

func (s *source) Uncertain(last *State, loaded bool, _ kit.Uncertainty) *State {
	if loaded {
		return last
	}
	return &State{Name: s.name, Unknown: true}
}

func (s *source) Same(a, b *State) bool { return *a == *b }

type metrics struct {
	batch     prometheus.Histogram
	conflicts prometheus.Counter
	unread    prometheus.Counter
	followed  prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) metrics {
	f := promauto.With(reg)
	return metrics{
		batch: f.NewHistogram(prometheus.HistogramOpts{
			Name:    "coord_counter_batch_size",
			Help:    "Adds combined into one compare-and-set of a counter (one ZooKeeper write per batch).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 13),
		}),
		conflicts: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_counter_cas_conflicts_total",
			Help: "Counter compare-and-sets refused because another writer came first (then retried).",
		}),
		unread: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_counter_writes_unread_total",
			Help: "Counter compare-and-sets sent on the value this sidecar wrote last, without reading it first (one child watch on the counters guards against a counter deleted and made again).",
		}),
		followed: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_counter_followed", Help: "Counters this sidecar follows (one ZooKeeper watch each).",
		}),
	}
}
