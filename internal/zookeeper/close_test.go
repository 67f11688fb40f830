package zookeeper

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Goroutines started on the Session from outside it (a call cut off by its
// deadline, Go) while it closes: each is either started before Close waits, and
// waited for, or refused; after Close, Go starts nothing and calls fail without
// hanging. Under -race an unowned start would be reported (or panic: "WaitGroup
// is reused before previous Wait has returned").
func TestGoRacingClose(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	for round := range 5 {
		s := newTestSession(t, zkc.Servers(), root)
		ep, err := s.Current()
		if err != nil {
			t.Fatal(err)
		}
		var ran, refused atomic.Int64
		stop := make(chan struct{})
		var callers sync.WaitGroup
		for range 4 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if !s.Go(func() { ran.Add(1) }) {
						refused.Add(1)
					}
					// A deadline sooner than the session timeout: the call runs on
					// a goroutine of the Session (callBy).
					ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
					_, _, _ = ep.Exists(ctx, "/")
					cancel()
				}
			}()
		}
		testutil.Eventually(t, 10*time.Second, "goroutines started on the session", func() bool { return ran.Load() >= 100 })
		s.Close()
		atClose := ran.Load()
		testutil.Eventually(t, 10*time.Second, "a Go refused", func() bool { return refused.Load() > 0 })
		close(stop)
		callers.Wait()
		if n := ran.Load(); n != atClose {
			t.Fatalf("round %d: %d goroutines ran after Close returned", round, n-atClose)
		}
		if s.Go(func() { t.Error("a goroutine started after Close") }) {
			t.Fatalf("round %d: Go after Close reported a start", round)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		_, _, err = ep.Exists(ctx, "/")
		cancel()
		if !errors.Is(err, ErrSessionLost) {
			t.Fatalf("round %d: a call after Close: %v, want ErrSessionLost", round, err)
		}
	}
}
