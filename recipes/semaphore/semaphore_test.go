package semaphore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/kittest"
)

// At most max permits at once among many leases, granted in order; a full
// semaphore answers SemaphoreFullError with its holders; a release frees a
// permit, and a lease's end frees its permit for a waiter.
func TestSemaphoreRecipe(t *testing.T) {
	zkc := zktest.Shared(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), zktest.Root(t))
	leases := kit.NewLeases(s, nil)
	sems := New(s, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	grant := kittest.GrantFor(t, leases)

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

// A semaphore's max is its holders': an acquire with another max is a
// MaxMismatchError naming it and leaves no node; a lease asking again with
// another max keeps its permit; of acquirers racing with two different max,
// only those with the first granted's are granted; a lease node placed as
// Curator places it (no max recorded) is never a max to differ from.
func TestSemaphoreMaxMismatchRecipe(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), root)
	leases := kit.NewLeases(s, nil)
	sems := New(s, prometheus.NewRegistry())
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	grant := kittest.GrantFor(t, leases)

	a := grant()
	pa, err := sems.Acquire(ctx, a, "two", "a", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	before := zktest.Dump(t, conn, root)
	var mismatch *MaxMismatchError
	for _, max := range []int{100, 1} {
		if _, err := sems.Acquire(ctx, grant(), "two", "b", max, time.Second); !errors.As(err, &mismatch) || mismatch.Max != 2 {
			t.Fatalf("max=%d: %v", max, err)
		}
	}
	if _, err := sems.Acquire(ctx, a, "two", "a", 3, 0); !errors.As(err, &mismatch) || mismatch.Max != 2 {
		t.Fatalf("the holder's lease with max=3: %v", err)
	}
	if after := zktest.Dump(t, conn, root); !slices.Equal(before, after) {
		t.Fatalf("a refused acquire changed the tree:\nbefore %v\nafter  %v", before, after)
	}
	if p, err := sems.Acquire(ctx, a, "two", "a", 2, 0); err != nil || p != pa {
		t.Fatalf("the holder's lease with max=2 again: %v, %v", p, err)
	}
	if _, err := sems.Acquire(ctx, grant(), "two", "b", 2, 0); err != nil {
		t.Fatalf("same max: %v", err)
	}

	raceTwoMax(ctx, t, sems, grant)
	curatorLeaseRecordsNoMax(ctx, t, sems, grant, conn, root)
}

// raceTwoMax races three acquirers with max=3 and three with max=4: whichever
// is granted first sets the max, the three of its kind are granted, the others
// refused with that max.
func raceTwoMax(ctx context.Context, t *testing.T, sems *Semaphores, grant func() *kit.Lease) {
	t.Helper()
	var mismatch *MaxMismatchError
	type result struct {
		max int
		err error
	}
	results := make(chan result, 6)
	for i := range 6 {
		max := 3 + i%2
		l := grant()
		go func() {
			_, err := sems.Acquire(ctx, l, "race", "r", max, 30*time.Second)
			results <- result{max, err}
		}()
	}
	var granted, refused []int
	for range 6 {
		r := <-results
		switch {
		case r.err == nil:
			granted = append(granted, r.max)
		case errors.As(r.err, &mismatch) && mismatch.Max != r.max:
			refused = append(refused, mismatch.Max)
		default:
			t.Fatalf("race, max=%d: %v", r.max, r.err)
		}
	}
	all := append(granted, refused...)
	if len(granted) != 3 || len(refused) != 3 || slices.ContainsFunc(all, func(m int) bool { return m != all[0] }) {
		t.Fatalf("granted with max %v, refused naming max %v", granted, refused)
	}

}

// curatorLeaseRecordsNoMax places a lease node as Curator does (its data is
// its host's address, no max): the sidecar's first holder beside it sets the
// max, and the holders' owners read back as written.
func curatorLeaseRecordsNoMax(ctx context.Context, t *testing.T, sems *Semaphores, grant func() *kit.Lease, conn *zk.Conn, root string) {
	t.Helper()
	var mismatch *MaxMismatchError
	base := root + "/semaphores/shared/leases"
	for _, p := range []string{root + "/semaphores", root + "/semaphores/shared", base} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := conn.Create(base+"/_c_"+zookeeper.NewGUID()+"-lease-", []byte("10.0.0.7"), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if p, err := sems.Acquire(ctx, grant(), "shared", "s", 5, 0); err != nil || p.Max != 5 {
		t.Fatalf("max=5 beside Curator's holder: %v, %v", p, err)
	}
	if _, err := sems.Acquire(ctx, grant(), "shared", "t", 7, 0); !errors.As(err, &mismatch) || mismatch.Max != 5 {
		t.Fatalf("max=7 after the sidecar's max=5: %v", err)
	}
	st, err := sems.Inspect(ctx, "shared")
	if err != nil || len(st.Holders) != 2 || st.Holders[0].Owner != "10.0.0.7" || st.Holders[1].Owner != "s" {
		t.Fatalf("holders: %+v, %v", st, err)
	}
}
