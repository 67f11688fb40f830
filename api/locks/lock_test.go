package locks_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Two sidecars on one ZooKeeper, 20 clients taking one lock 50 times each to
// increment a counter kept outside the lock: the counter ends at 1000, no two
// grants overlap, and successive fencing tokens strictly increase.
func TestMutualExclusionAcrossSidecars(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}

	const clients, rounds = 20, 50
	var (
		counter int // deliberately unprotected but by the lock
		inside  atomic.Int32
		overlap atomic.Int32
		mu      sync.Mutex
		tokens  []int64
	)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			car := cars[c%2]
			for range rounds {
				r, err := car.Do(context.Background(), http.MethodPost, fmt.Sprintf("/v1/locks/counter?wait=60s&ttl=30s&owner=client-%d", c), nil)
				if err != nil || r.Status != http.StatusCreated {
					errs <- fmt.Errorf("acquire: %v %v", err, r)
					return
				}
				if !inside.CompareAndSwap(0, 1) {
					overlap.Add(1)
				}
				v := counter
				time.Sleep(time.Duration(c%3) * 100 * time.Microsecond) // widen the window a race would need
				counter = v + 1
				mu.Lock()
				tokens = append(tokens, sidecartest.Num(r.Body["fencingToken"]))
				mu.Unlock()
				inside.Store(0)
				d, err := car.Do(context.Background(), http.MethodDelete, "/v1/locks/counter?lease="+sidecartest.Str(r.Body["lease"]), nil)
				if err != nil || d.Status != http.StatusNoContent {
					errs <- fmt.Errorf("release: %v %v", err, d)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if counter != clients*rounds {
		t.Fatalf("counter = %d, want %d", counter, clients*rounds)
	}
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d overlapping grants", n)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("fencing token %d at grant %d is not above %d", tokens[i], i, tokens[i-1])
		}
	}
	t.Logf("%d grants over 2 sidecars, tokens %d..%d", len(tokens), tokens[0], tokens[len(tokens)-1])
}

// A waiter whose client disconnects mid-wait leaves no node behind.
func TestDisconnectedWaiterLeavesNoNode(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	holder := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/job?owner=holder")
	ctx, cancel := context.WithCancel(context.Background())
	waited := make(chan error, 1)
	go func() {
		_, err := car.Do(ctx, http.MethodPost, "/v1/locks/job?wait=60s&owner=waiter", nil)
		waited <- err
	}()
	testutil.Eventually(t, 10*time.Second, "the waiter's node appears", func() bool { return len(sidecartest.LockNodes(t, conn, root, "job")) == 2 })
	cancel()
	if err := <-waited; !errors.Is(err, context.Canceled) {
		t.Fatalf("waiter: %v, want context.Canceled", err)
	}
	testutil.Eventually(t, 10*time.Second, "the waiter's node is deleted", func() bool { return len(sidecartest.LockNodes(t, conn, root, "job")) == 1 })
	st := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/job")
	if sidecartest.Num(st.Body["waiters"]) != 0 || sidecartest.Num(st.Body["holder"].(map[string]any)["fencingToken"]) != sidecartest.Num(holder.Body["fencingToken"]) {
		t.Fatalf("after the waiter left: %s", st.Raw)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/job?lease="+sidecartest.Str(holder.Body["lease"]))
	testutil.Eventually(t, 10*time.Second, "no node is left", func() bool { return len(sidecartest.LockNodes(t, conn, root, "job")) == 0 })
}

// Revoking a lease that is waiting for a lock answers once its waiter's node is
// gone: a DELETE /v1/leases/{id} 204 means nothing of the lease is left.
func TestRevokedLeaseLeavesNoWaiter(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/job?owner=holder&ttl=60s")
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	waited := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/locks/job?wait=60s&owner=waiter&lease="+lease, nil)
		waited <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the waiter's node appears", func() bool { return len(sidecartest.LockNodes(t, conn, root, "job")) == 2 })
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	if n := len(sidecartest.LockNodes(t, conn, root, "job")); n != 1 {
		t.Fatalf("right after the revoke: %d lock nodes, want the holder's alone", n)
	}
	if r := <-waited; r == nil || r.Status < 400 || r.Status >= 500 {
		t.Fatalf("the waiter's answer: %+v, want a 4xx", r)
	}
}

// A lease that is not kept alive frees its lock within its TTL.
func TestUnrenewedLeaseFreesLockWithinTTL(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	const ttl = 2 * time.Second
	lease := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl="+ttl.String())
	id := sidecartest.Str(lease.Body["lease"])
	granted := time.Now()
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/report?lease="+id)
	car.Must(t, http.StatusConflict, http.MethodPost, "/v1/locks/report")
	r := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/report?wait=30s&owner=next")
	freedAfter := time.Since(granted)
	// The lease ends at grant + TTL; allow one second for the release to reach the waiter.
	if freedAfter > ttl+time.Second {
		t.Fatalf("lock freed %s after the grant, TTL %s", freedAfter, ttl)
	}
	car.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+id)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/report?lease="+sidecartest.Str(r.Body["lease"]))
	t.Logf("freed %s after the grant (TTL %s)", freedAfter.Round(time.Millisecond), ttl)
}

// Closing the keepalive stream frees the lease's lock at once, and the stream
// keeps a lease alive past its TTL while open. What frees the lock is the
// stream closing, not the TTL: a second stream on the lease (the watch) keeps
// it from expiring meanwhile, and sees it end as revoked.
func TestClosingKeepaliveStreamFreesLock(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	lease := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=1s")
	id := sidecartest.Str(lease.Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/stream-job?lease="+id)
	st := car.OpenStream(t, "/v1/leases/"+id+"/events")
	first := st.Next(t, 5*time.Second)
	if first.Name != "lease" || sidecartest.Str(first.Data["lease"]) != id {
		t.Fatalf("first event %+v", first)
	}
	holds, _ := first.Data["holds"].([]any)
	if len(holds) != 1 {
		t.Fatalf("first event holds %v", first.Data["holds"])
	}
	// Past the 1s TTL the lease still lives, because the stream is open.
	time.Sleep(1500 * time.Millisecond)
	car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+id)

	watch := car.OpenStream(t, "/v1/leases/"+id+"/events")
	if ev := watch.Next(t, 5*time.Second); ev.Name != "lease" || sidecartest.Str(ev.Data["lease"]) != id {
		t.Fatalf("the watch's first event %+v", ev)
	}
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/locks/stream-job?wait=30s", nil)
		got <- r
	}()
	st.Cancel()
	select {
	case r := <-got:
		if r == nil || r.Status != http.StatusCreated {
			t.Fatalf("waiter after the stream closed: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lock was not freed when the keepalive stream closed")
	}
	if ev := watch.Next(t, 5*time.Second); ev.Name != "revoked" || sidecartest.Str(ev.Data["lease"]) != id {
		t.Fatalf("the lease ended with %+v, want revoked (by the stream closing)", ev)
	}
	car.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+id)
}

// The sidecar's lock and go-zookeeper's zk.Lock on the same path exclude each other.
func TestInteropWithGoZookeeperLock(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	lk := zk.NewLock(conn, path.Join(root, "locks", "shared"), zk.WorldACL(zk.PermAll))

	// zk.Lock holds: the sidecar is refused.
	if err := lk.Lock(); err != nil {
		t.Fatal(err)
	}
	r := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/locks/shared")
	if r.Body["holder"] == nil {
		t.Fatalf("409 without the holder: %s", r.Raw)
	}
	// A sidecar waiter is granted when zk.Lock releases.
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/locks/shared?wait=30s", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the sidecar waits", func() bool { return sidecartest.Num(car.Must(t, 200, "GET", "/v1/locks/shared").Body["waiters"]) == 1 })
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	var grant *sidecartest.Response
	select {
	case grant = <-got:
		if grant == nil || grant.Status != http.StatusCreated {
			t.Fatalf("sidecar after zk.Unlock: %+v", grant)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the sidecar was not granted after zk.Unlock")
	}
	// The sidecar holds: zk.Lock blocks until the sidecar releases.
	locked := make(chan error, 1)
	go func() { locked <- lk.Lock() }()
	select {
	case err := <-locked:
		t.Fatalf("zk.Lock returned (%v) while the sidecar holds the lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/shared?lease="+sidecartest.Str(grant.Body["lease"]))
	select {
	case err := <-locked:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("zk.Lock was not granted after the sidecar released")
	}
	_ = lk.Unlock()
}

// A kazoo-style contender (<uuid>__lock__<seq>) is ordered by its sequence suffix:
// when it holds, the sidecar waits for it.
func TestOrdersForeignContendersBySequence(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	parent := path.Join(root, "locks", "mixed")
	for _, p := range []string{root, path.Join(root, "locks"), parent} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	kazoo, err := conn.Create(parent+"/0f1e2d3c4b5a__lock__", []byte("kazoo"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	r := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/locks/mixed")
	if h := r.Body["holder"].(map[string]any); sidecartest.Str(h["owner"]) != "kazoo" {
		t.Fatalf("holder %v, want the kazoo contender", h)
	}
	if err := conn.Delete(kazoo, -1); err != nil {
		t.Fatal(err)
	}
	g := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/mixed")
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/mixed?lease="+sidecartest.Str(g.Body["lease"]))
}

// A wait longer than the implicit lease's TTL still ends in a grant: the TTL of an
// implicit lease counts from the answer, not from the start of the wait.
func TestImplicitLeaseOutlastsLongWait(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	holder := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/long-wait")
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/locks/long-wait?ttl=1s&wait=30s", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the waiter waits", func() bool {
		return sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/long-wait").Body["waiters"]) == 1
	})
	time.Sleep(1500 * time.Millisecond) // longer than the waiter's 1s TTL
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/long-wait?lease="+sidecartest.Str(holder.Body["lease"]))
	select {
	case r := <-got:
		if r == nil || r.Status != http.StatusCreated {
			t.Fatalf("waiter after a wait longer than its TTL: %+v", r)
		}
		car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+sidecartest.Str(r.Body["lease"]))
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not granted")
	}
}
