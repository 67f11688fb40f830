package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// BenchmarkRestart measures a restart on a state directory as an operator
// sees it: a sidecar process holding n locks on one lease is killed with
// SIGKILL and started again on the same directory; the figure is the time
// from the kill to /readyz answering 200 (the session resumed, the lease
// re-created, every hold adopted and the lines swept), with the session
// timeout at its default of 10s. Targets (issue 23): under 1s with one hold;
// within half the session timeout (5s) with 10,000.
func BenchmarkRestart(b *testing.B) {
	for _, n := range []int{1, 10000} {
		b.Run(fmt.Sprintf("holds=%d", n), func(b *testing.B) {
			last := (*ebResult)(nil)
			ebRunOnce(b, &last, func(b *testing.B) ebResult { return restartRound(b, n) })
		})
	}
}

// restartRound holds n locks, kills, restarts and times the restart to ready.
func restartRound(b *testing.B, n int) ebResult {
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	r := newRestartable(b, zkc.Servers(), root, "10s")
	a := r.start(b)
	lease := str(a.must(b, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=10m").Body["lease"])
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(n, 64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				a.must(b, http.StatusCreated, http.MethodPost, fmt.Sprintf("/v1/locks/r-%05d?lease=%s", i, lease))
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	deadline := time.Now().Add(time.Minute)
	for strings.Count(r.savedState(b), `"kind":"lock"`) != n {
		if time.Now().After(deadline) {
			b.Fatalf("the state file never listed the %d holds", n)
		}
		time.Sleep(10 * time.Millisecond)
	}

	r.kill(b)
	killed := time.Now()
	a = r.start(b)
	took := time.Since(killed)
	held := metricValue(b, a, "coord_restart_holds_resumed_total")
	if int(held) != n {
		b.Fatalf("%v holds resumed, want %d", held, n)
	}
	b.Logf("holds=%d: ready %s after SIGKILL", n, took.Round(time.Millisecond))
	return ebResult{samples: 1, mean: took, metrics: map[string]float64{"ms-to-ready": ebMillis(took)}}
}
