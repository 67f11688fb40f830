package main

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The floor serves the bench's lock cycle correctly against a real ZooKeeper:
// on the hot lock its holders never overlap and their fencing tokens rise
// (runRound's exclusion check), on distinct locks every worker cycles, the
// latency table gets its floor row (uncontended acquires measured; a handoff
// is counted only when the other client was waiting already, which a busy
// machine may never show within the second), and a release of a lease it
// does not hold is a 404.
func TestFloorServesTheLockCycle(t *testing.T) {
	zkc := zktest.Shared(t)
	f, err := newFloor(strings.Join(zkc.Servers(), ","), "/coord-bench-floor-test-"+rand.Text()[:8])
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	srv := httptest.NewServer(f.handler())
	defer srv.Close()
	e := &sidecarEngine{id: "floor", bases: []string{srv.URL}, client: newHTTPClient(), locksOnly: true}
	defer e.close()
	o := &options{zk: strings.Join(zkc.Servers(), ",")}
	for _, r := range []row{allRows["hot"], allRows["c16"]} {
		rd, err := runRound(context.Background(), o, e, r, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if rd.cycles == 0 {
			t.Errorf("%s: no cycle in a second", r.name)
		}
	}
	if _, _, err := e.workers(context.Background(), allRows["counter-c1"], nil); err == nil {
		t.Errorf("the floor engine offers counter rows")
	}
	var b strings.Builder
	if err := measureLatency(context.Background(), &b, &options{rounds: 1}, []engine{e}, time.Second); err != nil {
		t.Fatal(err)
	}
	contains(t, "the latency table", b.String(), "| engine | uncontended acquire, p50 / p99 µs | handoff, p50 / p99 µs |\n", "| floor | ")
	if strings.Contains(b.String(), "| floor | –") {
		t.Errorf("no uncontended acquire in a second:\n%s", b.String())
	}
	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/v1/locks/x?lease=nobody", nil)
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("release of a lease not held: status %d, want 404", resp.StatusCode)
	}
}
