package tasks_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/tasks"
)

// Starts racing Close: every goroutine Go started has returned by the time
// Close returns, and no Go after that starts anything. Under -race a count
// added while Close waits would be reported (or panic).
func TestGoRacingClose(t *testing.T) {
	for range 200 {
		var g tasks.Group
		var started, ended atomic.Int64
		var callers sync.WaitGroup
		for range 8 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				for range 50 {
					if g.Go(func() { ended.Add(1) }) {
						started.Add(1)
					}
				}
			}()
		}
		g.Close()
		atEnd := ended.Load()
		callers.Wait()
		if s := started.Load(); s != atEnd {
			t.Fatalf("Close returned with %d of %d started goroutines ended", atEnd, s)
		}
		if g.Go(func() { t.Error("a goroutine started after Close") }) {
			t.Fatal("Go after Close reported a start")
		}
	}
}

// Close waits for a goroutine under way, and a second Close waits too.
func TestCloseWaits(t *testing.T) {
	var g tasks.Group
	release := make(chan struct{})
	var done atomic.Bool
	g.Go(func() { <-release; done.Store(true) })
	closed := make(chan struct{}, 2)
	go func() { g.Close(); closed <- struct{}{} }()
	go func() { g.Close(); closed <- struct{}{} }()
	close(release)
	<-closed
	<-closed
	if !done.Load() {
		t.Fatal("Close returned before its goroutine ended")
	}
}
