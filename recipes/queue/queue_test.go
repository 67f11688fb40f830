package queue

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func TestItemNamesRoundTrip(t *testing.T) {
	data, h := encodeItem("application/json; charset=utf-8", []byte(`{"a":1}`))
	ct, payload, err := decodeItem(data)
	if err != nil || ct != "application/json; charset=utf-8" || string(payload) != `{"a":1}` {
		t.Fatalf("decode = %q %q %v", ct, payload, err)
	}
	name := itemPrefix(h, newToken()) + "0000000042"
	seq, hdr, _, ok := parseItemName(name)
	if !ok || seq != 42 || hdr != h {
		t.Fatalf("parseItemName(%q) = %d %d %v", name, seq, hdr, ok)
	}
	r := itemRef{prio: 7, bucket: 3, seq: seq, name: name}
	id := r.id()
	if !kit.ValidName(id) {
		t.Fatalf("id %q is not a valid name", id)
	}
	back, ok := parseItemID(id)
	if !ok || back.prio != 7 || back.bucket != 3 || back.seq != 42 || back.name != name || back.key != id {
		t.Fatalf("parseItemID(%q) = %+v %v", id, back, ok)
	}
	for _, bad := range []string{"", "p7.b0000000003." + name, "p07.b3." + name, "p07.b0000000003.x", "p100.b0000000003." + name} {
		if _, ok := parseItemID(bad); ok {
			t.Errorf("parseItemID(%q) accepted", bad)
		}
	}
}

// queueEnv is a queue recipe on its own session.
type queueEnv struct {
	s *zookeeper.Session
	q *Queues
	l *kit.Leases
}

func newQueueEnv(t testing.TB, servers []string, root string) *queueEnv {
	t.Helper()
	s := newTestSession(t, servers, root)
	env := &queueEnv{s: s, q: New(s, prometheus.NewRegistry()), l: kit.NewLeases(s, nil)}
	t.Cleanup(env.close)
	return env
}

// close ends the session, then waits for every goroutine of the queues and the
// leases.
func (env *queueEnv) close() {
	env.s.Close()
	env.q.Close()
	env.l.Wait()
}

func mustEnqueue(t *testing.T, q *Queues, name string, prio int, ct, data string) string {
	t.Helper()
	id, err := q.Enqueue(context.Background(), name, prio, ct, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustTake(t *testing.T, q *Queues, name string) *Item {
	t.Helper()
	it, err := q.Take(context.Background(), name, 0)
	if err != nil {
		t.Fatal(err)
	}
	return it
}

func takeData(t *testing.T, q *Queues, name string) string {
	t.Helper()
	it := mustTake(t, q, name)
	if it == nil {
		return "<empty>"
	}
	return string(it.Data)
}

// Items come out by priority, then in the order they went in; content types are
// kept; an empty queue answers nil.
func TestQueuePriorityAndFIFO(t *testing.T) {
	zkc := zktest.Shared(t)
	env := newQueueEnv(t, zkc.Servers(), zktest.Root(t))
	q := env.q
	if it := mustTake(t, q, "jobs"); it != nil {
		t.Fatalf("take from a queue never made: %+v", it)
	}
	mustEnqueue(t, q, "jobs", 5, "text/plain", "a5")
	mustEnqueue(t, q, "jobs", 0, "", "b0")
	mustEnqueue(t, q, "jobs", 5, "text/plain", "c5")
	mustEnqueue(t, q, "jobs", 99, "application/json", `"d99"`)
	id := mustEnqueue(t, q, "jobs", 0, "text/csv", "e0")
	if !strings.HasPrefix(id, "p00.b0000000000.") || !kit.ValidName(id) {
		t.Fatalf("id %q", id)
	}

	st, err := q.Inspect(context.Background(), "jobs")
	if err != nil || st.Length != 5 || st.Claimed != 0 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	items, err := q.Items(context.Background(), "jobs", 3)
	if err != nil || len(items) != 3 || items[0].Priority != 0 || items[1].ID != id || items[2].Priority != 5 || items[1].Size != 2 {
		t.Fatalf("Items = %+v, %v", items, err)
	}
	takeJobsInOrder(t, q)
}

// takeJobsInOrder takes TestQueuePriorityAndFIFO's items: by priority, then in
// the order they went in, with their content types; then the queue is empty.
func takeJobsInOrder(t *testing.T, q *Queues) {
	t.Helper()
	want := []string{"b0", "e0", "a5", "c5", `"d99"`}
	for i, w := range want {
		it := mustTake(t, q, "jobs")
		if it == nil || string(it.Data) != w {
			t.Fatalf("take %d = %+v, want %q", i, it, w)
		}
		if i == 0 && it.ContentType != DefaultContentType || i == 1 && it.ContentType != "text/csv" || i == 4 && it.ContentType != "application/json" {
			t.Fatalf("take %d content type %q", i, it.ContentType)
		}
	}
	if it := mustTake(t, q, "jobs"); it != nil {
		t.Fatalf("take from an empty queue: %+v", it)
	}
}

// Bad input is refused before any ZooKeeper call.
func TestQueueRefusesBadInput(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	env := newQueueEnv(t, zkc.Servers(), root)
	ctx := context.Background()
	if _, err := env.q.Enqueue(ctx, "jobs", 100, "", nil); !errors.Is(err, kit.ErrInvalidArgument) {
		t.Fatalf("priority 100: %v", err)
	}
	if _, err := env.q.Enqueue(ctx, "jobs", -1, "", nil); !errors.Is(err, kit.ErrInvalidArgument) {
		t.Fatalf("priority -1: %v", err)
	}
	if _, err := env.q.Enqueue(ctx, "..", 0, "", nil); !errors.Is(err, kit.ErrInvalidName) {
		t.Fatalf("name ..: %v", err)
	}
	if _, err := env.q.Enqueue(ctx, "jobs", 0, strings.Repeat("x", 256), nil); !errors.Is(err, kit.ErrInvalidArgument) {
		t.Fatalf("long content type: %v", err)
	}
	if _, err := env.q.Take(ctx, "a/b", 0); !errors.Is(err, kit.ErrInvalidName) {
		t.Fatalf("take a/b: %v", err)
	}
	if err := env.q.Ack(ctx, "jobs", "nope"); !errors.Is(err, ErrClaimNotFound) {
		t.Fatalf("ack unknown: %v", err)
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	if ok, _, _ := conn.Exists(root); ok {
		t.Fatalf("%s was created by bad input: %v", root, zktest.Dump(t, conn, root))
	}
}

// Buckets close at 1000 sequences and the next one opens; takers delete the
// closed buckets they drain, and a queue drained to empty keeps only its tail.
func TestQueueBucketsRollOverAndDrainedOnesGo(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	env := newQueueEnv(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	const n = 2300
	fill(t, env.q, "deep", 0, n, 16)
	pp := path.Join(root, "queues", "deep", "p00")
	buckets, _, err := conn.Children(pp)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(buckets)
	if len(buckets) < 3 || buckets[0] != "b0000000000" {
		t.Fatalf("buckets after %d items: %v", n, buckets)
	}
	for _, b := range buckets[:len(buckets)-1] {
		if _, st, err := conn.Get(pp + "/" + b); err != nil || st.Version != 1 || st.NumChildren > 1100 {
			t.Fatalf("bucket %s: %+v %v, want closed and bounded", b, st, err)
		}
	}
	var prev itemRef
	seen := map[string]bool{}
	for i := range n {
		it := mustTake(t, env.q, "deep")
		if it == nil {
			t.Fatalf("empty after %d takes", i)
		}
		r, ok := parseItemID(it.ID)
		if !ok || i > 0 && !prev.before(r) {
			t.Fatalf("take %d: item %s after %s", i, it.ID, prev.key)
		}
		prev = r
		seen[string(it.Data)] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct items taken, want %d", len(seen), n)
	}
	if it := mustTake(t, env.q, "deep"); it != nil {
		t.Fatalf("queue not empty: %+v", it)
	}
	left, _, err := conn.Children(pp)
	if err != nil || len(left) != 1 || left[0] != buckets[len(buckets)-1] {
		t.Fatalf("buckets left %v (%v), want only the tail %s", left, err, buckets[len(buckets)-1])
	}
}

// fill enqueues n items "0".."n-1" with `workers` producers that each keep their
// own items in order; it returns once all are stored.
func fill(t testing.TB, q *Queues, name string, prio, n, workers int) {
	t.Helper()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := q.Enqueue(context.Background(), name, prio, "", []byte(fmt.Sprint(i))); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A producer whose cached tail was closed by another sidecar meanwhile does not
// write behind the newer bucket: its transaction fails as a whole and it finds
// the new tail.
func TestQueueStaleTailCacheKeepsOrder(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	b := newQueueEnv(t, zkc.Servers(), root)
	first := mustEnqueue(t, a.q, "mixed", 0, "", "a-first") // a caches the tail b0
	for i := range bucketSize {
		mustEnqueue(t, b.q, "mixed", 0, "", fmt.Sprint("b-", i))
	}
	last := mustEnqueue(t, a.q, "mixed", 0, "", "a-last")
	if !strings.HasPrefix(first, "p00.b0000000000.") || !strings.HasPrefix(last, "p00.b0000000001.") {
		t.Fatalf("a's items %s then %s: the second must be in the new tail", first, last)
	}
	var got []string
	for {
		it := mustTake(t, b.q, "mixed")
		if it == nil {
			break
		}
		got = append(got, string(it.Data))
	}
	if len(got) != bucketSize+2 || got[0] != "a-first" || got[len(got)-1] != "a-last" {
		t.Fatalf("took %d items, first %q last %q", len(got), got[0], got[len(got)-1])
	}
}

// A take waiting on an empty queue wakes when another sidecar enqueues, and a new
// item of a better priority overtakes a cached worse one.
func TestQueueWatchesWakeTakers(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	b := newQueueEnv(t, zkc.Servers(), root)
	got := make(chan *Item, 1)
	errc := make(chan error, 1)
	start := time.Now()
	go func() {
		it, err := b.q.Take(context.Background(), "wake", 20*time.Second)
		errc <- err
		got <- it
	}()
	testutil.Eventually(t, 5*time.Second, "the taker is waiting (its watch is armed)", func() bool {
		b.q.mu.Lock()
		defer b.q.mu.Unlock()
		return b.q.queues["wake"] != nil
	})
	mustEnqueue(t, a.q, "wake", 3, "", "hello")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if it := <-got; it == nil || string(it.Data) != "hello" {
		t.Fatalf("waiting take got %+v", it)
	}
	t.Logf("woken after %s", time.Since(start).Round(time.Millisecond))

	// b caches priority 5; a better item enqueued through a overtakes it.
	for i := range 20 {
		mustEnqueue(t, a.q, "wake", 5, "", fmt.Sprint("five-", i))
	}
	if d := takeData(t, b.q, "wake"); d != "five-0" {
		t.Fatalf("first take %q", d)
	}
	mustEnqueue(t, a.q, "wake", 1, "", "one")
	deadline := time.Now().Add(5 * time.Second)
	for n := 0; ; n++ {
		d := takeData(t, b.q, "wake")
		if d == "one" {
			t.Logf("priority 1 overtook after %d more takes", n)
			break
		}
		if d == "<empty>" || time.Now().After(deadline) {
			t.Fatalf("priority 1 item never overtook (last %q)", d)
		}
	}
}

// A claimed item is hidden from takes and claims everywhere; released, it is
// first again; acked, it is gone for good.
func TestQueueClaimsHideReleaseAndAck(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	b := newQueueEnv(t, zkc.Servers(), root)
	ctx := context.Background()
	for _, s := range []string{"x", "y", "z"} {
		mustEnqueue(t, a.q, "work", 0, "", s)
	}
	lease, err := a.l.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	c1, err := a.q.Claim(ctx, lease, "work", 0)
	if err != nil || c1 == nil || string(c1.Item.Data) != "x" {
		t.Fatalf("claim = %+v, %v", c1, err)
	}
	if !kit.ValidName(c1.ID) || len(lease.Holds()) != 1 {
		t.Fatalf("claim id %q, holds %v", c1.ID, lease.Holds())
	}
	st, err := b.q.Inspect(ctx, "work")
	if err != nil || st.Length != 2 || st.Claimed != 1 {
		t.Fatalf("Inspect = %+v, %v", st, err)
	}
	if d := takeData(t, b.q, "work"); d != "y" { // x is claimed: skipped
		t.Fatalf("take while x is claimed: %q", d)
	}
	if err := a.q.Release(ctx, "work", c1.ID); err != nil {
		t.Fatal(err)
	}
	if err := a.q.Release(ctx, "work", c1.ID); !errors.Is(err, ErrClaimNotFound) {
		t.Fatalf("second release: %v", err)
	}
	// x is back in its old place, before z, for b whose cache skipped it, once
	// b's watch of claims/ tells it (a watch notification later).
	testutil.Eventually(t, 5*time.Second, "b sees the claim released", func() bool {
		st := b.q.state("work")
		st.mu.Lock()
		defer st.mu.Unlock()
		return !st.claimed[c1.Item.ID]
	})
	claimAgainAndAck(t, a, b, c1)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	if kids, _, err := conn.Children(path.Join(root, "queues", "work", "claims")); err == nil && len(kids) > 0 {
		t.Fatalf("claim markers left: %v", kids)
	}
}

// claimAgainAndAck is TestQueueClaimsHideReleaseAndAck's second half: b claims
// the released item c1 again and acks it, and it is gone for good.
func claimAgainAndAck(t *testing.T, a, b *queueEnv, c1 *Claim) {
	t.Helper()
	ctx := context.Background()
	c2, err := b.q.Claim(ctx, mustLease(t, b.l), "work", 5*time.Second)
	if err != nil || c2 == nil || string(c2.Item.Data) != "x" || c2.Item.ID != c1.Item.ID {
		t.Fatalf("claim after release = %+v, %v", c2, err)
	}
	if err := b.q.Ack(ctx, "work", c2.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.q.Ack(ctx, "work", c2.ID); !errors.Is(err, ErrClaimNotFound) {
		t.Fatalf("second ack: %v", err)
	}
	if d := takeData(t, a.q, "work"); d != "z" {
		t.Fatalf("take after ack: %q", d)
	}
	if d := takeData(t, a.q, "work"); d != "<empty>" {
		t.Fatalf("acked item came back: %q", d)
	}
}

func mustLease(t *testing.T, l *kit.Leases) *kit.Lease {
	t.Helper()
	lease, err := l.Grant(time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

// inOrderItems is TestQueueItemsInOrder's size: 8 buckets of 1,000, enough for
// every claim the test makes (buckets roll over, are listed about once each and
// dropped when drained, under 32 producers and 32 takers); the same experiment
// at 200,000 items is BenchmarkQueue200kItemsInOrder, in make bench.
const inOrderItems = 8_000

// Items enqueued by 32 producers and taken by 32 takers: each item is taken
// exactly once, each producer's items come out in its order, each taker gets
// items in queue order, and the takers list about one bucket per 1,000 takes: no
// listing of the whole queue, whatever its depth.
func TestQueueItemsInOrder(t *testing.T) {
	enqueued, taken, listings := itemsInOrder(t, inOrderItems)
	t.Logf("enqueued %d in %s, took them in %s with %v bucket listings", inOrderItems,
		enqueued.Round(time.Millisecond), taken.Round(time.Millisecond), listings)
}

// BenchmarkQueue200kItemsInOrder is TestQueueItemsInOrder at 200,000 items, with
// its checks: enqueues/s, takes/s and bucket listings per 1,000 takes (go test
// -bench Queue200k -benchtime 1x ./recipes/queue/).
func BenchmarkQueue200kItemsInOrder(b *testing.B) {
	for range b.N {
		const total = 200_000
		enqueued, taken, listings := itemsInOrder(b, total)
		b.ReportMetric(total/enqueued.Seconds(), "enqueues/s")
		b.ReportMetric(total/taken.Seconds(), "takes/s")
		b.ReportMetric(listings/total*1000, "listings/1000-takes")
	}
}

// itemsInOrder runs TestQueueItemsInOrder's experiment with total items and
// checks it; it returns how long the enqueues and the takes took and how many
// bucket listings the takers made.
func itemsInOrder(tb testing.TB, total int) (enqueued, taken time.Duration, listings float64) {
	zkc := zktest.Shared(tb)
	root := zktest.Root(tb)
	prod := newQueueEnv(tb, zkc.Servers(), root)
	cons := newQueueEnv(tb, zkc.Servers(), root)
	const producers, takers = 32, 32
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, producers+takers)
	for p := range producers {
		wg.Go(func() {
			for i := range total / producers {
				if _, err := prod.q.Enqueue(context.Background(), "big", 0, "text/plain", fmt.Appendf(nil, "%d:%d", p, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	enqueued = time.Since(start)
	st, err := cons.q.Inspect(context.Background(), "big")
	if err != nil || st.Length != total {
		tb.Fatalf("Inspect after filling = %+v, %v", st, err)
	}

	start = time.Now()
	got := make([][]itemRef, takers) // per taker, in take order
	vals := make([][][2]int, takers) // per taker: producer, index
	for k := range takers {
		wg.Go(func() {
			for {
				it, err := cons.q.Take(context.Background(), "big", 0)
				if err != nil {
					errs <- err
					return
				}
				if it == nil {
					return
				}
				r, _ := parseItemID(it.ID)
				var p, i int
				if _, err := fmt.Sscanf(string(it.Data), "%d:%d", &p, &i); err != nil {
					errs <- fmt.Errorf("item %s: %q", it.ID, it.Data)
					return
				}
				got[k] = append(got[k], r)
				vals[k] = append(vals[k], [2]int{p, i})
			}
		})
	}
	wg.Wait()
	taken = time.Since(start)
	close(errs)
	for err := range errs {
		tb.Fatal(err)
	}

	checkTakenOnceInOrder(tb, got, vals, total, producers)
	listings = promtest.ToFloat64(cons.q.metrics.listings)
	if listings > float64(total/bucketSize*3) {
		tb.Fatalf("%v bucket listings for %d takes", listings, total)
	}
	return enqueued, taken, listings
}

// checkTakenOnceInOrder checks itemsInOrder's takes (got and vals,
// per taker in take order): each item taken exactly once, in each taker's order,
// and each producer's order.
func checkTakenOnceInOrder(t testing.TB, got [][]itemRef, vals [][][2]int, total, producers int) {
	t.Helper()
	takers := len(got)
	pos := map[[2]int]itemRef{}
	for k := range takers {
		for j, r := range got[k] {
			if j > 0 && !got[k][j-1].before(r) {
				t.Fatalf("taker %d took %s after %s", k, r.key, got[k][j-1].key)
			}
			v := vals[k][j]
			if _, dup := pos[v]; dup {
				t.Fatalf("item %v taken twice", v)
			}
			pos[v] = r
		}
	}
	if len(pos) != total {
		t.Fatalf("%d items taken, want %d", len(pos), total)
	}
	for p := range producers {
		for i := 1; i < total/producers; i++ {
			if a, b := pos[[2]int{p, i - 1}], pos[[2]int{p, i}]; !a.before(b) {
				t.Fatalf("producer %d: item %d (%s) is not before item %d (%s)", p, i-1, a.key, i, b.key)
			}
		}
	}
}

// A claim with an implicit lease waits longer than its TTL without the lease
// expiring; the TTL then counts from the grant.
func TestQueueImplicitClaimOutwaitsItsTTL(t *testing.T) {
	zkc := zktest.Shared(t)
	env := newQueueEnv(t, zkc.Servers(), zktest.Root(t))
	const ttl = time.Second
	lease, err := env.l.Grant(ttl, true)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *Claim, 1)
	errc := make(chan error, 1)
	go func() {
		c, err := env.q.Claim(context.Background(), lease, "late", 10*time.Second)
		errc <- err
		got <- c
	}()
	<-time.After(2 * ttl) // the behaviour under test: the TTL passes while the claim waits
	if lease.Err() != nil {
		t.Fatalf("the implicit lease ended while its claim waited: %v", lease.Err())
	}
	mustEnqueue(t, env.q, "late", 0, "", "finally")
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	granted := time.Now()
	if c := <-got; c == nil || string(c.Item.Data) != "finally" {
		t.Fatalf("claim = %+v", c)
	}
	select {
	case <-lease.Done():
		if held := time.Since(granted); held < ttl/2 {
			t.Fatalf("the claim ended %s after its grant, TTL %s", held, ttl)
		}
	case <-time.After(5 * ttl):
		t.Fatal("the claim's lease never expired")
	}
	if c, err := env.q.Claim(context.Background(), mustLease(t, env.l), "late", 5*time.Second); err != nil || c == nil || string(c.Item.Data) != "finally" {
		t.Fatalf("after the claim expired: %+v, %v", c, err)
	}
}
