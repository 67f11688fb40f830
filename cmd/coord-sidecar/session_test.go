package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Session expiry, forced by cutting the TCP proxy between a sidecar and ZooKeeper
// for longer than the session timeout: the lease stream says `lost`, the lease is
// gone, and a contender on the other sidecar gets the lock.
func TestSessionExpiryLosesGrants(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy, err := faultproxy.New(zkc.Server(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	cut := startSidecar(t, []string{proxy.Addr()}, root, "--session-timeout", "1s")
	other := startSidecar(t, zkc.Servers(), root)

	lease := str(cut.must(http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	g := cut.must(http.StatusCreated, http.MethodPost, "/v1/locks/fenced?owner=cut-off&lease="+lease)
	st := cut.openStream("/v1/leases/" + lease + "/events")
	if ev := st.next(t, 5*time.Second); ev.Name != "lease" {
		t.Fatalf("first event %+v", ev)
	}
	got := make(chan *response, 1)
	go func() {
		r, _ := other.do(context.Background(), http.MethodPost, "/v1/locks/fenced?wait=60s&owner=survivor", nil)
		got <- r
	}()
	eventually(t, 10*time.Second, "the other sidecar waits", func() bool {
		return num(other.must(200, "GET", "/v1/locks/fenced").Body["waiters"]) == 1
	})

	proxy.Cut()
	if ev := st.next(t, 20*time.Second); ev.Name != "lost" {
		t.Fatalf("lease stream after the cut: %+v, want lost", ev)
	}
	r, err := cut.do(context.Background(), http.MethodGet, "/v1/leases/"+lease, nil)
	if err != nil || r.Status != http.StatusNotFound {
		t.Fatalf("lease after loss: %v %+v", err, r)
	}
	select {
	case r := <-got:
		if r == nil || r.Status != http.StatusCreated {
			t.Fatalf("contender on the other sidecar: %+v", r)
		}
		if num(r.Body["fencingToken"]) <= num(g.Body["fencingToken"]) {
			t.Fatalf("new token %v not above the lost one %v", r.Body["fencingToken"], g.Body["fencingToken"])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the other sidecar was never granted the lock")
	}

	// Once the network is back the cut sidecar gets a new session and serves again.
	proxy.Restore()
	cut.waitReady()
	s := cut.must(http.StatusOK, http.MethodGet, "/v1/session")
	if str(s.Body["state"]) != "connected" {
		t.Fatalf("session after restore: %s", s.Raw)
	}
}
