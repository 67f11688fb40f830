package locks_test

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// fleetSize is how many sidecars TestFleetHandsOneLockThroughEverySidecar
// runs: one per application replica, as a fleet is deployed (issue 26).
const fleetSize = 64

// A fleet of 64 sidecars on a 3-node ensemble, each with its own session and
// one waiter on one lock, hands the lock through every sidecar: grants come in
// the order the waiters arrived, with strictly increasing fencing tokens, and
// never to two holders at once. Correctness at a fleet's size, not speed (the
// speed is make bench's fleet rows).
//
// Arrival order is made certain, not hoped for: waiter i is sent only once
// sidecar i-1's own session sees i-1 waiters (a session reads its own writes,
// and a server that has applied a create has applied every earlier one).
func TestFleetHandsOneLockThroughEverySidecar(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts 64 sidecars")
	}
	start := time.Now()
	servers := zktest.SharedEnsemble(t).Servers()
	root := zktest.Root(t)
	fleet := make([]*sidecartest.Sidecar, fleetSize)
	var wg sync.WaitGroup
	for i := range fleet {
		wg.Add(1)
		go func() { // each on one server of the ensemble, as replicas spread
			defer wg.Done()
			fleet[i] = sidecartest.Run(t, []string{servers[i%len(servers)]}, root, "--session-timeout", "10s")
		}()
	}
	wg.Wait()
	for _, s := range fleet {
		s.WaitReady(t)
	}
	t.Logf("%d sidecars ready in %v", fleetSize, time.Since(start))

	type grant struct {
		owner string
		token int64
	}
	var (
		holders atomic.Int32 // holders at this moment, by the grants' answers
		mu      sync.Mutex
		grants  []grant
		failed  = make(chan string, fleetSize)
	)
	leases := make([]string, fleetSize)
	for i, s := range fleet {
		leases[i] = sidecartest.Str(s.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=600s").Body["lease"])
	}
	// hold records a grant, checks it is the only holder, and releases it.
	hold := func(i int, resp *sidecartest.Response) {
		if n := holders.Add(1); n != 1 {
			failed <- fmt.Sprintf("sidecar %d granted while %d others hold the lock", i, n-1)
		}
		mu.Lock()
		grants = append(grants, grant{owner: sidecartest.Str(resp.Body["owner"]), token: sidecartest.Num(resp.Body["fencingToken"])})
		mu.Unlock()
		holders.Add(-1)
		if r, err := fleet[i].FaultCall(time.Minute, http.MethodDelete, "/v1/locks/fleet?lease="+leases[i]); err != nil || r.Status != http.StatusNoContent {
			failed <- fmt.Sprintf("sidecar %d's release: %v %v", i, r, err)
		}
	}

	first := fleet[0].Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/fleet?owner=s0&lease="+leases[0])
	var waiting sync.WaitGroup
	for i := 1; i < fleetSize; i++ {
		waiting.Add(1)
		go func() {
			defer waiting.Done()
			path := fmt.Sprintf("/v1/locks/fleet?wait=300s&owner=s%d&lease=%s", i, leases[i])
			resp, err := fleet[i].FaultCall(6*time.Minute, http.MethodPost, path)
			if err != nil || resp.Status != http.StatusCreated {
				failed <- fmt.Sprintf("sidecar %d's acquire: %v %v", i, resp, err)
				return
			}
			hold(i, resp)
		}()
		testutil.Eventually(t, time.Minute, fmt.Sprintf("waiter %d in line", i), func() bool {
			return sidecartest.Num(fleet[i].Must(t, http.StatusOK, http.MethodGet, "/v1/locks/fleet").Body["waiters"]) == int64(i)
		})
	}
	t.Logf("%d waiters in line after %v", fleetSize-1, time.Since(start))
	hold(0, first)
	waiting.Wait()
	t.Logf("the lock went through every sidecar after %v", time.Since(start))
	close(failed)
	for f := range failed {
		t.Error(f)
	}
	if len(grants) != fleetSize {
		t.Fatalf("%d grants, want %d", len(grants), fleetSize)
	}
	for i, g := range grants {
		if want := fmt.Sprintf("s%d", i); g.owner != want {
			t.Fatalf("grant %d went to %s, want %s (arrival order); grants: %v", i, g.owner, want, grants)
		}
		if i > 0 && g.token <= grants[i-1].token {
			t.Fatalf("grant %d's fencing token %d is not above the previous %d", i, g.token, grants[i-1].token)
		}
	}
}
