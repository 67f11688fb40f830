package queues_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// quPos is an item's place in its priority, read from its id
// ("pNN.b<bucket>.i<h>-<token>-<seq>"): bucket, then sequence.
type quPos struct{ bucket, seq int64 }

func quPosOf(t testing.TB, id string) quPos {
	parts := strings.Split(id, ".")
	if len(parts) != 3 || len(parts[1]) != 11 || len(parts[2]) < 10 {
		t.Errorf("malformed item id %q", id)
		return quPos{}
	}
	b, err1 := strconv.ParseInt(parts[1][1:], 10, 64)
	s, err2 := strconv.ParseInt(parts[2][len(parts[2])-10:], 10, 64)
	if err1 != nil || err2 != nil {
		t.Errorf("malformed item id %q", id)
	}
	return quPos{b, s}
}

func (p quPos) before(o quPos) bool {
	return p.bucket < o.bucket || p.bucket == o.bucket && p.seq < o.seq
}

// quEnqueue posts one item and returns its id.
func quEnqueue(ctx context.Context, car *sidecartest.Sidecar, queue, query, contentType string, body []byte) (string, error) {
	r, err := car.Do(ctx, "POST", "/v1/queues/"+queue+"/items"+query, bytes.NewReader(body), "Content-Type", contentType)
	if err != nil {
		return "", err
	}
	if r.Status != http.StatusCreated {
		return "", fmt.Errorf("enqueue: %d %s", r.Status, r.Raw)
	}
	return sidecartest.Str(r.Body["id"]), nil
}

// quTake takes one item (nil when empty).
func quTake(ctx context.Context, car *sidecartest.Sidecar, queue, wait string) (*sidecartest.Response, error) {
	r, err := car.Do(ctx, "POST", "/v1/queues/"+queue+"/take?wait="+wait, nil)
	switch {
	case err != nil:
		return nil, err
	case r.Status == http.StatusNoContent:
		return nil, nil
	case r.Status != http.StatusOK:
		return nil, fmt.Errorf("take: %d %s", r.Status, r.Raw)
	}
	return r, nil
}

// quTaken is an item a taker got: producer p's index-th item, at pos in the queue.
type quTaken struct {
	producer, index int
	pos             quPos
}

// 4 producers and 4 takers over 2 sidecars move 800 items: every item is taken
// exactly once, each producer's items come out in its order, and each taker gets
// items in queue order.
func TestQueueProducersAndTakersAcrossSidecars(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}
	const producers, takers, perProducer = 4, 4, 200
	const total = producers * perProducer

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, producers+takers)
	var wg sync.WaitGroup
	var produced sync.WaitGroup
	for p := range producers {
		produced.Add(1)
		wg.Go(func() {
			defer produced.Done()
			for i := range perProducer {
				if _, err := quEnqueue(ctx, cars[p%2], "orders", "", "text/plain", fmt.Appendf(nil, "%d/%d", p, i)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { produced.Wait(); close(done) }()
	got := make([][]quTaken, takers)
	for k := range takers {
		wg.Go(func() {
			if err := quTakeUntilDone(ctx, t, cars[(k+1)%2], "orders", done, &got[k]); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	seen := quCheckTakerOrder(t, got)
	if len(seen) != total {
		t.Fatalf("%d items taken, want %d", len(seen), total)
	}
	for p := range producers {
		for i := 1; i < perProducer; i++ {
			if a, b := seen[[2]int{p, i - 1}], seen[[2]int{p, i}]; !a.before(b) {
				t.Fatalf("producer %d: item %d at %+v is not before item %d at %+v", p, i-1, a, i, b)
			}
		}
	}
	counts := make([]int, takers)
	for k := range got {
		counts[k] = len(got[k])
	}
	t.Logf("items per taker: %v", counts)
	if r := cars[0].Must(t, http.StatusOK, "GET", "/v1/queues/orders"); sidecartest.Num(r.Body["length"]) != 0 || sidecartest.Num(r.Body["claimed"]) != 0 {
		t.Fatalf("queue after the run: %s", r.Raw)
	}
}

// quTakeUntilDone takes items of "producer/index" from queue into got until done
// is closed and the queue is empty. It runs on a goroutine of its own: it
// reports malformed ids with t.Errorf and everything else as its error.
func quTakeUntilDone(ctx context.Context, t testing.TB, car *sidecartest.Sidecar, queue string, done <-chan struct{}, got *[]quTaken) error {
	for {
		r, err := quTake(ctx, car, queue, "1s")
		if err != nil {
			return err
		}
		if r == nil {
			select {
			case <-done: // producers finished and the queue is empty
				if r, err = quTake(ctx, car, queue, "0s"); err != nil || r == nil {
					return err
				}
			default:
				continue
			}
		}
		var it quTaken
		if _, err := fmt.Sscanf(string(r.Raw), "%d/%d", &it.producer, &it.index); err != nil {
			return fmt.Errorf("item %q: %v", r.Raw, err)
		}
		if ct := r.Header.Get("Content-Type"); ct != "text/plain" {
			return fmt.Errorf("item %q: Content-Type %q", r.Raw, ct)
		}
		it.pos = quPosOf(t, r.Header.Get("Item-Id"))
		*got = append(*got, it)
	}
}

// quCheckTakerOrder checks that each taker got its items in queue order and no
// item was taken twice, and returns where each (producer, index) was.
func quCheckTakerOrder(t *testing.T, got [][]quTaken) map[[2]int]quPos {
	t.Helper()
	seen := map[[2]int]quPos{}
	for k, items := range got {
		for j, it := range items {
			if j > 0 && !items[j-1].pos.before(it.pos) {
				t.Fatalf("taker %d got %+v after %+v", k, it, items[j-1])
			}
			key := [2]int{it.producer, it.index}
			if _, dup := seen[key]; dup {
				t.Fatalf("item %v taken twice", key)
			}
			seen[key] = it.pos
		}
	}
	return seen
}

// The enqueue answer, the listing, the counts, the kept content type, and the
// Item-Id of a take all agree; priorities come out lower first.
func TestQueueItemsAndPriorities(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	ctx := context.Background()
	low, err := quEnqueue(ctx, car, "mail", "?priority=9", "application/json", []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	high, err := quEnqueue(ctx, car, "mail", "?priority=0", "", []byte("urgent"))
	if err != nil {
		t.Fatal(err)
	}
	r := car.Must(t, http.StatusOK, "GET", "/v1/queues/mail")
	if sidecartest.Num(r.Body["length"]) != 2 || sidecartest.Num(r.Body["claimed"]) != 0 || sidecartest.Str(r.Body["name"]) != "mail" {
		t.Fatalf("GET queue: %s", r.Raw)
	}
	r = car.Must(t, http.StatusOK, "GET", "/v1/queues/mail/items?limit=10")
	items := r.Body["items"].([]any)
	if len(items) != 2 {
		t.Fatalf("items: %s", r.Raw)
	}
	first, second := items[0].(map[string]any), items[1].(map[string]any)
	if !quListed(first, high, 0, 6) || !quListed(second, low, 9, 7) {
		t.Fatalf("items in take order: %s (ids %s, %s)", r.Raw, high, low)
	}
	t1, _ := quTake(ctx, car, "mail", "0s")
	t2, _ := quTake(ctx, car, "mail", "0s")
	if !quIsItem(t1, "urgent", high, "application/octet-stream") {
		t.Fatalf("first take: %+v", t1)
	}
	if !quIsItem(t2, `{"n":1}`, low, "application/json") {
		t.Fatalf("second take: %+v", t2)
	}
	car.Must(t, http.StatusNoContent, "POST", "/v1/queues/mail/take")
	start := time.Now()
	car.Must(t, http.StatusNoContent, "POST", "/v1/queues/mail/take?wait=300ms")
	if time.Since(start) < 300*time.Millisecond {
		t.Fatal("take?wait=300ms answered before the wait")
	}
	// An empty item is refused (the contract requires the body), and nothing is stored.
	if _, err := quEnqueue(ctx, car, "mail", "", "text/plain", nil); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("empty item: %v, want a 400", err)
	}
	if r, err := quTake(ctx, car, "mail", "0s"); err != nil || r != nil {
		t.Fatalf("after an empty item: %+v %v", r, err)
	}
}

// quListed reports whether an entry of an item listing has the given id,
// priority and size.
func quListed(entry map[string]any, id string, priority, size int64) bool {
	return sidecartest.Str(entry["id"]) == id && sidecartest.Num(entry["priority"]) == priority && sidecartest.Num(entry["size"]) == size
}

// quIsItem reports whether a take's answer is the item id with the given data
// and Content-Type.
func quIsItem(r *sidecartest.Response, data, id, contentType string) bool {
	return r != nil && string(r.Raw) == data && r.Header.Get("Item-Id") == id && r.Header.Get("Content-Type") == contentType
}

// Oversized items (413), bad priorities and other bad input (400) change nothing
// in ZooKeeper.
func TestQueueBadInputChangesNothing(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root, "--max-item", "1024")
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	if _, err := quEnqueue(ctx, car, "q", "", "text/plain", []byte("keep")); err != nil {
		t.Fatal(err)
	}
	before := zktest.Snapshot(t, conn, root)
	cases := []struct {
		name, method, path string
		body               []byte
		status             int
		problem            string
	}{
		{"oversized item", "POST", "/v1/queues/q/items", bytes.Repeat([]byte("x"), 1025), 413, "body-too-large"},
		{"oversized item to a new queue", "POST", "/v1/queues/fresh/items", bytes.Repeat([]byte("x"), 4096), 413, "body-too-large"},
		{"priority 100", "POST", "/v1/queues/q/items?priority=100", []byte("x"), 400, "invalid-parameter"},
		{"priority -1", "POST", "/v1/queues/q/items?priority=-1", []byte("x"), 400, "invalid-parameter"},
		{"priority not a number", "POST", "/v1/queues/q/items?priority=high", []byte("x"), 400, "invalid-parameter"},
		{"delay above 30 days", "POST", "/v1/queues/q/items?delay=721h", []byte("x"), 400, "invalid-parameter"},
		{"delay to a new queue", "POST", "/v1/queues/fresh/items?delay=721h", []byte("x"), 400, "invalid-parameter"},
		{"negative delay", "POST", "/v1/queues/q/items?delay=-5s", []byte("x"), 400, "invalid-parameter"},
		{"malformed delay", "POST", "/v1/queues/q/items?delay=soon", []byte("x"), 400, "invalid-parameter"},
		{"delay and at", "POST", "/v1/queues/q/items?delay=5s&at=2020-01-01T00:00:00Z", []byte("x"), 400, "invalid-parameter"},
		{"malformed at", "POST", "/v1/queues/q/items?at=tomorrow", []byte("x"), 400, "invalid-parameter"},
		{"at without a zone", "POST", "/v1/queues/q/items?at=2026-11-28T12:00:00", []byte("x"), 400, "invalid-parameter"},
		{"at beyond 30 days", "POST", "/v1/queues/q/items?at=2999-01-01T00:00:00Z", []byte("x"), 400, "invalid-parameter"},
		{"bad queue name", "POST", "/v1/queues/..%2Fx/items", []byte("x"), 400, "invalid-name"},
		{"bad name on take", "POST", "/v1/queues/-q/take", nil, 400, "invalid-name"},
		{"bad wait on take", "POST", "/v1/queues/q/take?wait=soon", nil, 400, "invalid-parameter"},
		{"bad ttl on claim", "POST", "/v1/queues/q/claims?ttl=1ms", nil, 400, "invalid-parameter"},
		{"unknown lease on claim", "POST", "/v1/queues/q/claims?lease=nosuchlease", nil, 404, "lease-not-found"},
		{"limit 0", "GET", "/v1/queues/q/items?limit=0", nil, 400, "invalid-parameter"},
		{"limit 1001", "GET", "/v1/queues/q/items?limit=1001", nil, 400, "invalid-parameter"},
		{"ack unknown claim", "DELETE", "/v1/queues/q/claims/p00.b0000000000.i2-x-0000000000.abc", nil, 404, "claim-not-found"},
		{"release unknown claim", "POST", "/v1/queues/q/claims/nope/release", nil, 404, "claim-not-found"},
		{"bad claim id", "DELETE", "/v1/queues/q/claims/_x", nil, 400, "invalid-name"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := car.Do(ctx, c.method, c.path, bytes.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			sidecartest.ProblemIs(t, r, c.status, c.problem)
		})
	}
	if d := zktest.SnapshotDiff(before, zktest.Snapshot(t, conn, root)); d != "" {
		t.Fatalf("the ZooKeeper tree changed:\n%s", d)
	}
	r := car.Must(t, http.StatusOK, "GET", "/v1/queues/q")
	if sidecartest.Num(r.Body["length"]) != 1 {
		t.Fatalf("queue after bad input: %s", r.Raw)
	}
}

// quClaim claims one item (nil when empty).
func quClaim(t *testing.T, car *sidecartest.Sidecar, queue, query string) *sidecartest.Response {
	t.Helper()
	r, err := car.Do(context.Background(), "POST", "/v1/queues/"+queue+"/claims"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	switch r.Status {
	case http.StatusNoContent:
		return nil
	case http.StatusOK:
		if r.Header.Get("Claim-Id") == "" || r.Header.Get("Item-Id") == "" {
			t.Fatalf("claim without ids: %v", r.Header)
		}
		return r
	}
	t.Fatalf("claim: %d %s", r.Status, r.Raw)
	return nil
}

// An unacked claim comes back after its TTL and is delivered again; an acked one
// never does; a released one is first again at once.
func TestClaimsExpireAckAndRelease(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	ctx := context.Background()
	for _, s := range []string{"first", "second", "third"} {
		if _, err := quEnqueue(ctx, a, "jobs", "", "text/plain", []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	const ttl = time.Second
	forgotten := quClaim(t, a, "jobs", "?ttl="+ttl.String())
	claimedAt := time.Now()
	if string(forgotten.Raw) != "first" {
		t.Fatalf("first claim: %q", forgotten.Raw)
	}
	acked := quClaim(t, a, "jobs", "?ttl=30s")
	if string(acked.Raw) != "second" {
		t.Fatalf("second claim: %q", acked.Raw)
	}
	a.Must(t, http.StatusNoContent, "DELETE", "/v1/queues/jobs/claims/"+acked.Header.Get("Claim-Id"))
	a.Must(t, http.StatusNotFound, "DELETE", "/v1/queues/jobs/claims/"+acked.Header.Get("Claim-Id"))
	if r := b.Must(t, http.StatusOK, "GET", "/v1/queues/jobs"); sidecartest.Num(r.Body["length"]) != 1 || sidecartest.Num(r.Body["claimed"]) != 1 {
		t.Fatalf("queue with one claim out: %s", r.Raw)
	}
	// Claims and takes on the other sidecar skip the claimed item.
	released := quClaim(t, b, "jobs", "?ttl=30s")
	if string(released.Raw) != "third" {
		t.Fatalf("claim on b: %q", released.Raw)
	}
	b.Must(t, http.StatusNoContent, "POST", "/v1/queues/jobs/take")
	// Released: first in line again, at once, on the sidecar that held it.
	b.Must(t, http.StatusNoContent, "POST", "/v1/queues/jobs/claims/"+released.Header.Get("Claim-Id")+"/release")
	b.Must(t, http.StatusNotFound, "POST", "/v1/queues/jobs/claims/"+released.Header.Get("Claim-Id")+"/release")
	again := quClaim(t, b, "jobs", "?ttl=30s&wait=0s")
	if again == nil || string(again.Raw) != "third" || again.Header.Get("Item-Id") != released.Header.Get("Item-Id") {
		t.Fatalf("claim after release: %+v", again)
	}
	// The forgotten claim ends with its TTL: the item is delivered again.
	back := quClaim(t, b, "jobs", "?ttl=30s&wait=10s")
	if back == nil || string(back.Raw) != "first" || back.Header.Get("Item-Id") != forgotten.Header.Get("Item-Id") {
		t.Fatalf("after the TTL: %+v", back)
	}
	if after := time.Since(claimedAt); after < ttl || after > ttl+2*time.Second {
		t.Fatalf("redelivered %s after the claim, TTL %s", after, ttl)
	}
	t.Logf("unacked claim redelivered %s after it was made (TTL %s)", time.Since(claimedAt).Round(time.Millisecond), ttl)
	a.Must(t, http.StatusNotFound, "DELETE", "/v1/queues/jobs/claims/"+forgotten.Header.Get("Claim-Id"))
	b.Must(t, http.StatusNoContent, "DELETE", "/v1/queues/jobs/claims/"+back.Header.Get("Claim-Id"))
	b.Must(t, http.StatusNoContent, "DELETE", "/v1/queues/jobs/claims/"+again.Header.Get("Claim-Id"))
	// Nothing comes back: the acked items are gone for good.
	if r := quClaim(t, a, "jobs", "?ttl=30s&wait=2s"); r != nil {
		t.Fatalf("an acked item came back: %q", r.Raw)
	}
	if r := a.Must(t, http.StatusOK, "GET", "/v1/queues/jobs"); sidecartest.Num(r.Body["length"]) != 0 || sidecartest.Num(r.Body["claimed"]) != 0 {
		t.Fatalf("queue at the end: %s", r.Raw)
	}
	testutil.Eventually(t, 5*time.Second, "implicit leases ended", func() bool {
		return sidecartest.Num(a.Must(t, 200, "GET", "/v1/session").Body["leases"]) == 0 &&
			sidecartest.Num(b.Must(t, 200, "GET", "/v1/session").Body["leases"]) == 0
	})
}

// A sidecar killed with claims in hand loses no item. A kill is simulated by
// cutting the sidecar off ZooKeeper for good: it releases nothing, and its
// session expires on the server, as a dead process's does (Main.Close would
// release the claims politely, which a killed process never does).
func TestKilledSidecarLosesNoClaimedItem(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	doomed := sidecartest.Start(t, []string{proxy.Addr()}, root)
	survivor := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	const n = 10
	for i := range n {
		if _, err := quEnqueue(ctx, survivor, "work", "", "text/plain", []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	lease := sidecartest.Str(doomed.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=5m").Body["lease"])
	claimed := map[string]bool{}
	for range 3 {
		r := quClaim(t, doomed, "work", "?lease="+lease)
		claimed[string(r.Raw)] = true
	}
	if !claimed["0"] || !claimed["1"] || !claimed["2"] {
		t.Fatalf("claimed %v", claimed)
	}
	markers, _, err := conn.Children(path.Join(root, "queues", "work", "claims"))
	if err != nil || len(markers) != 3 {
		t.Fatalf("claim markers %v %v", markers, err)
	}
	proxy.Cut()
	killed := time.Now()

	got := map[string]bool{}
	var firstBack time.Duration
	for len(got) < n {
		r, err := quTake(ctx, survivor, "work", "20s")
		if err != nil {
			t.Fatal(err)
		}
		if r == nil {
			t.Fatalf("the queue ran dry with %d of %d items taken: %v", len(got), n, got)
		}
		v := string(r.Raw)
		if got[v] {
			t.Fatalf("item %s taken twice", v)
		}
		if claimed[v] && firstBack == 0 {
			firstBack = time.Since(killed)
			if len(got) != n-3 {
				t.Fatalf("claimed item %s taken while %d unclaimed items were left", v, n-3-len(got))
			}
		}
		got[v] = true
	}
	t.Logf("the dead sidecar's claimed items were delivered again %s after it was cut off (session timeout 2s)", firstBack.Round(time.Millisecond))
	if r := survivor.Must(t, http.StatusOK, "GET", "/v1/queues/work"); sidecartest.Num(r.Body["length"]) != 0 || sidecartest.Num(r.Body["claimed"]) != 0 {
		t.Fatalf("queue at the end: %s", r.Raw)
	}
}

// A claim that waits on an empty queue and whose client goes away leaves nothing
// behind: no node, no lease.
func TestWaitingClaimLeavesNothingBehind(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := car.Do(ctx, "POST", "/v1/queues/idle/claims?wait=30s", nil)
		done <- err
	}()
	testutil.Eventually(t, 5*time.Second, "the claim waits with its implicit lease", func() bool {
		return sidecartest.Num(car.Must(t, 200, "GET", "/v1/session").Body["leases"]) == 1
	})
	before := zktest.Snapshot(t, conn, root)
	cancel()
	<-done
	testutil.Eventually(t, 5*time.Second, "the implicit lease ended", func() bool {
		return sidecartest.Num(car.Must(t, 200, "GET", "/v1/session").Body["leases"]) == 0
	})
	if d := zktest.SnapshotDiff(before, zktest.Snapshot(t, conn, root)); d != "" {
		t.Fatalf("the tree changed:\n%s", d)
	}
}
