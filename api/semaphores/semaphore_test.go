package semaphores_test

import (
	"context"
	"fmt"
	"net/http"
	"path"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Semaphore max=2, two sidecars, 6 clients looping acquire, hold, release: an
// outside counter never sees more than 2 inside, and nothing is left at the end.
func TestSemaphoreAcrossSidecars(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	const clients, rounds, max = 6, 15, 2
	var inside, most, grants atomic.Int32
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			car := cars[c%2]
			for range rounds {
				r, err := car.Do(context.Background(), http.MethodPost, fmt.Sprintf("/v1/semaphores/pay/permits?max=%d&wait=60s&owner=client-%d", max, c), nil)
				if err != nil || r.Status != http.StatusCreated {
					errs <- fmt.Errorf("acquire: %v %v", err, r)
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				grants.Add(1)
				time.Sleep(time.Duration(c%3) * time.Millisecond) // hold a little: a window for a third
				inside.Add(-1)
				d, err := car.Do(context.Background(), http.MethodDelete, "/v1/semaphores/pay/permits/"+sidecartest.Str(r.Body["permit"])+"?lease="+sidecartest.Str(r.Body["lease"]), nil)
				if err != nil || d.Status != http.StatusNoContent {
					errs <- fmt.Errorf("release: %v %v", err, d)
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
	if m := most.Load(); m > max {
		t.Fatalf("%d clients inside at once, max is %d", m, max)
	}
	t.Logf("%d grants, at most %d inside at once", grants.Load(), most.Load())
	base := root + "/semaphores/pay"
	testutil.Eventually(t, 5*time.Second, "nodes left under %s", func() bool {
		return len(sidecartest.Children(t, conn, base+"/leases")) == 0 && len(sidecartest.Children(t, conn, base+"/locks")) == 0
	})
}

// A lease's end frees its permit for a waiter.
func TestSemaphoreLeaseEndFreesPermit(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)

	lease := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	held := a.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/s/permits?max=1&owner=first&lease="+lease)
	full := b.Must(t, http.StatusConflict, http.MethodPost, "/v1/semaphores/s/permits?max=1")
	sidecartest.ProblemIs(t, full, http.StatusConflict, "semaphore-full")
	if hs, _ := full.Body["holders"].([]any); len(hs) != 1 || sidecartest.Str(hs[0].(map[string]any)["owner"]) != "first" ||
		sidecartest.Str(hs[0].(map[string]any)["permit"]) != sidecartest.Str(held.Body["permit"]) {
		t.Fatalf("holders = %v", full.Body["holders"])
	}

	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := b.Do(context.Background(), http.MethodPost, "/v1/semaphores/s/permits?max=1&wait=30s&owner=second", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the second client never waited", func() bool {
		return sidecartest.Num(a.Must(t, http.StatusOK, http.MethodGet, "/v1/semaphores/s").Body["waiters"]) == 1
	})
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	select {
	case r := <-got:
		if r == nil || r.Status != http.StatusCreated || sidecartest.Str(r.Body["owner"]) != "second" {
			t.Fatalf("waiter got %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the lease's end did not free its permit")
	}
	st := a.Must(t, http.StatusOK, http.MethodGet, "/v1/semaphores/s").Body
	if hs, _ := st["holders"].([]any); len(hs) != 1 || sidecartest.Str(hs[0].(map[string]any)["owner"]) != "second" || sidecartest.Num(st["waiters"]) != 0 {
		t.Fatalf("state = %v", st)
	}
}

// A waiter whose client goes away leaves no node, in the internal mutex's line
// or among the leases, whether it waited for the mutex or for a lease.
func TestSemaphoreDisconnectedWaiterLeavesNothing(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	base := root + "/semaphores/d"

	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/d/permits?max=1")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 { // the first waits for a lease (holding the mutex), the second for the mutex
		wg.Go(func() {
			_, _ = car.Do(ctx, http.MethodPost, "/v1/semaphores/d/permits?max=1&wait=60s", nil)
		})
	}
	testutil.Eventually(t, 10*time.Second, "two waiters never waited", func() bool {
		return sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/semaphores/d").Body["waiters"]) == 2
	})
	cancel()
	wg.Wait()
	testutil.Eventually(t, 10*time.Second, "the waiters left nodes: locks %v, leases %v", func() bool {
		return len(sidecartest.Children(t, conn, base+"/locks")) == 0 && len(sidecartest.Children(t, conn, base+"/leases")) == 1
	})
}

// Curator's layout: the sidecar's nodes are named as InterProcessSemaphoreV2
// names them, and nodes placed as Curator places them (with go-zookeeper here)
// are respected as holders and as contenders for the internal mutex.
func TestSemaphoreSharesCuratorLayout(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	base := root + "/semaphores/shared"

	// The sidecar's lease node is Curator's.
	g := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/shared/permits?max=2&owner=sidecar")
	leaseNode := regexp.MustCompile(`^_c_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-lease-[0-9]{10}$`)
	ls := sidecartest.Children(t, conn, base+"/leases")
	if len(ls) != 1 || !leaseNode.MatchString(ls[0]) || "_c_"+sidecartest.Str(g.Body["permit"]) != ls[0] {
		t.Fatalf("leases = %v, permit %v", ls, g.Body["permit"])
	}

	// A Curator holder takes the second permit: the sidecar finds the semaphore full.
	curatorLease, err := conn.Create(base+"/leases/_c_"+zookeeper.NewGUID()+"-lease-", []byte("curator"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	full := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/semaphores/shared/permits?max=2")
	if hs, _ := full.Body["holders"].([]any); len(hs) != 2 || sidecartest.Str(hs[1].(map[string]any)["owner"]) != "curator" {
		t.Fatalf("holders = %v", full.Body["holders"])
	}
	if err := conn.Delete(curatorLease, -1); err != nil {
		t.Fatal(err)
	}

	// A Curator process holding the internal mutex (waiting for a lease) comes
	// first: the sidecar waits behind it although a permit is free.
	mutex, err := conn.Create(base+"/locks/_c_"+zookeeper.NewGUID()+"-lock-", nil, zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	car.Must(t, http.StatusConflict, http.MethodPost, "/v1/semaphores/shared/permits?max=2")
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/semaphores/shared/permits?max=2&wait=30s&owner=behind", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the sidecar's waiter never queued on the internal mutex", func() bool { return len(sidecartest.Children(t, conn, base+"/locks")) == 2 })
	select {
	case r := <-got:
		t.Fatalf("granted past Curator's mutex holder: %v", r)
	default:
	}
	if err := conn.Delete(mutex, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-got:
		if r == nil || r.Status != http.StatusCreated {
			t.Fatalf("after Curator let the mutex go: %v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not granted after Curator let the mutex go")
	}
	mutexNode := regexp.MustCompile(`^_c_[0-9a-f-]{36}-lock-[0-9]{10}$`)
	for _, n := range sidecartest.Children(t, conn, base+"/locks") {
		if !mutexNode.MatchString(n) {
			t.Fatalf("mutex node %s", path.Join(base, "locks", n))
		}
	}
}

// A semaphore's max is its holders': an acquire with another max answers 409
// max-mismatch with the holders' max and leaves the ZooKeeper tree as it was;
// one with the same max is granted. A permit node placed as Curator places it
// (no max recorded) does not count as a max.
func TestSemaphoreMaxMismatch(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/two/permits?max=2&owner=a")
	b := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/two/permits?max=2&owner=b")
	before := zktest.Dump(t, conn, root)
	for _, q := range []string{"max=100", "max=1", "max=3&wait=1s"} {
		r := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/semaphores/two/permits?"+q)
		if sidecartest.ProblemType(r) != "max-mismatch" || sidecartest.Num(r.Body["max"]) != 2 {
			t.Fatalf("%s: %v", q, r)
		}
	}
	if after := zktest.Dump(t, conn, root); !slices.Equal(before, after) {
		t.Fatalf("a refused acquire changed the tree:\nbefore %v\nafter  %v", before, after)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/semaphores/two/permits/"+sidecartest.Str(b.Body["permit"])+"?lease="+sidecartest.Str(b.Body["lease"]))
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/two/permits?max=2&owner=c")

	// Curator's permit (its data is its host's address) records no max: the
	// sidecar's first holder sets it.
	sidecartest.PlaceCuratorNode(t, conn, root+"/semaphores/shared/leases", "lease-", "10.0.0.7")
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/shared/permits?max=5&owner=s")
	r := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/semaphores/shared/permits?max=7")
	if sidecartest.ProblemType(r) != "max-mismatch" || sidecartest.Num(r.Body["max"]) != 5 {
		t.Fatalf("max=7 after a sidecar's max=5: %v", r)
	}
	holders, _ := car.Must(t, http.StatusOK, http.MethodGet, "/v1/semaphores/shared").Body["holders"].([]any)
	if len(holders) != 2 || sidecartest.Str(holders[0].(map[string]any)["owner"]) != "10.0.0.7" || sidecartest.Str(holders[1].(map[string]any)["owner"]) != "s" {
		t.Fatalf("holders = %v", holders)
	}
}
