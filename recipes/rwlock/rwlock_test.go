package rwlock

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/kittest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// Readers share, a writer waits for them, and a reader after a waiting writer
// waits for the writer.
func TestRWLockRecipe(t *testing.T) {
	zkc := zktest.Shared(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), zktest.Root(t))
	leases := kit.NewLeases(s, nil)
	rw := New(s, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	grant := kittest.GrantFor(t, leases)
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
