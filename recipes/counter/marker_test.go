package counter

import (
	"context"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

// An add whose answer is lost while another sidecar adds the very same amount
// to the very same value: the session's write marker tells the two apart, so
// the lost add is answered as applied exactly once, whatever the other did.
func TestLostAddIsToldApartFromAnIdenticalAdd(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := zookeepertest.Start(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Timeout: 20 * time.Second, Root: root})
	mine := New(s, nil)
	theirs := New(zookeepertest.NewSession(t, zkc.Servers(), root), nil)
	ctx := zookeeper.WithSuspendWait(context.Background(), time.Minute, time.Time{})
	if _, err := mine.Add(ctx, "c", 1); err != nil {
		t.Fatal(err)
	}

	// The lost add (1 -> 2) was applied; then the other adds 1 too: 3.
	proxy.LoseAnswerThenCut(14) // multi
	done := make(chan error, 1)
	var got int64
	go func() {
		var err error
		got, err = mine.Add(ctx, "c", 1)
		done <- err
	}()
	testutil.Eventually(t, 30*time.Second, "suspended", func() bool { return s.State() == zookeeper.StateSuspended })
	if v, err := theirs.Add(context.Background(), "c", 1); err != nil || v != 3 {
		t.Fatalf("the other's add: %d %v, want 3", v, err)
	}
	proxy.Restore()
	if err := <-done; err != nil {
		t.Fatalf("lost add: %v, want it adopted", err)
	}
	if got != 2 {
		t.Fatalf("lost add answered %d, want 2 (its value right after it)", got)
	}

	// The lost add never reached ZooKeeper: it is sent again, applied once.
	proxy.LoseRequest(14)
	if v, err := mine.Add(ctx, "c", 1); err != nil || v != 4 {
		t.Fatalf("add whose request was lost: %d %v, want 4", v, err)
	}
	st, err := theirs.Get(context.Background(), "c")
	if err != nil || st.Value != 4 {
		t.Fatalf("counter %+v (%v), want 4: each add applied once", st, err)
	}
}
