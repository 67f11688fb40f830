package recipes

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// At most max permits at once among many leases, granted in order; a full
// semaphore answers SemaphoreFullError with its holders; a release frees a
// permit, and a lease's end frees its permit for a waiter.
func TestSemaphoreRecipe(t *testing.T) {
	zkc := zktest.Shared(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), zktest.Root(t))
	leases := kit.NewLeases(s, nil)
	sems := NewSemaphores(s, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	grant := grantFor(t, leases)

	const workers, rounds, max = 5, 8, 2
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		l := grant()
		wg.Go(func() {
			for range rounds {
				p, err := sems.Acquire(ctx, l, "s", "w", max, 30*time.Second)
				if err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				inside.Add(-1)
				if err := sems.Release(ctx, l, "s", p.Permit); err != nil {
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
	if m := most.Load(); m > max {
		t.Fatalf("%d inside at once", m)
	}

	a, b := grant(), grant()
	pa, err := sems.Acquire(ctx, a, "one", "a", 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var full *SemaphoreFullError
	if _, err := sems.Acquire(ctx, b, "one", "b", 1, 0); !errors.As(err, &full) || len(full.Holders) != 1 || full.Holders[0].Permit != pa.Permit {
		t.Fatalf("second acquire: %v", err)
	}
	if err := sems.Release(ctx, a, "one", "not-"+pa.Permit); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("release of another permit id: %v", err)
	}
	got := make(chan error, 1)
	go func() { _, err := sems.Acquire(ctx, b, "one", "b", 1, 30*time.Second); got <- err }()
	testutil.Eventually(t, 10*time.Second, "b waiting", func() bool {
		st, err := sems.Inspect(ctx, "one")
		return err == nil && st.Waiters == 1
	})
	if err := leases.Revoke(a.ID); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter after the holder's lease ended: %v", err)
	}
}

// Readers share, a writer waits for them, and a reader after a waiting writer
// waits for the writer.
func TestRWLockRecipe(t *testing.T) {
	zkc := zktest.Shared(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), zktest.Root(t))
	leases := kit.NewLeases(s, nil)
	rw := NewRWLocks(s, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	grant := grantFor(t, leases)
	r1, r2, w, r3 := grant(), grant(), grant(), grant()
	if _, err := rw.Acquire(ctx, r1, "x", ReadMode, "r1", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Acquire(ctx, r2, "x", ReadMode, "r2", 0); err != nil {
		t.Fatal(err)
	}
	wDone := make(chan *RWGrant, 1)
	go func() { g, _ := rw.Acquire(ctx, w, "x", WriteMode, "w", 30*time.Second); wDone <- g }()
	testutil.Eventually(t, 10*time.Second, "the writer waiting", func() bool {
		st, err := rw.Inspect(ctx, "x")
		return err == nil && st.Waiters == 1 && len(st.Readers) == 2
	})
	var locked *RWLockedError
	if _, err := rw.Acquire(ctx, r3, "x", ReadMode, "r3", 0); !errors.As(err, &locked) || len(locked.Readers) != 2 {
		t.Fatalf("reader after a waiting writer: %v", err)
	}
	for _, l := range []*kit.Lease{r1, r2} {
		if err := rw.Release(ctx, l, "x", ReadMode); err != nil {
			t.Fatal(err)
		}
	}
	g := <-wDone
	if g == nil {
		t.Fatal("writer not granted")
	}
	if err := rw.Release(ctx, w, "x", ReadMode); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("release in the wrong mode: %v", err)
	}
	if err := rw.Release(ctx, w, "x", WriteMode); err != nil {
		t.Fatal(err)
	}
	g3, err := rw.Acquire(ctx, r3, "x", ReadMode, "r3", 10*time.Second)
	if err != nil || g3.FencingToken <= g.FencingToken {
		t.Fatalf("reader after the writer: %v %v", g3, err)
	}
}
