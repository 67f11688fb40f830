package api_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Session expiry, forced by cutting the TCP proxy between a sidecar and ZooKeeper
// for longer than the session timeout: the lease stream says `lost-hold` once
// the session could have expired (the lease lives on while the session may), a
// contender on the other sidecar gets the lock once ZooKeeper expired the session,
// and when the network is back ZooKeeper says so: the session stream says `lost`,
// the lease stream `lost`, and the lease is gone.
func TestSessionExpiryLosesGrants(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	cut := sidecartest.Start(t, []string{proxy.Addr()}, root, "--session-timeout", "1s")
	other := sidecartest.Start(t, zkc.Servers(), root)

	lease := sidecartest.Str(cut.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	g := cut.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/fenced?owner=cut-off&lease="+lease)
	st := cut.OpenStream(t, "/v1/leases/"+lease+"/events")
	if ev := st.Next(t, 5*time.Second); ev.Name != "lease" {
		t.Fatalf("first event %+v", ev)
	}
	sess := cut.OpenStream(t, "/v1/session/events")
	sess.Next(t, 5*time.Second)
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := other.Do(context.Background(), http.MethodPost, "/v1/locks/fenced?wait=60s&owner=survivor", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the other sidecar waits", func() bool {
		return sidecartest.Num(other.Must(t, 200, "GET", "/v1/locks/fenced").Body["waiters"]) == 1
	})

	proxy.Cut()
	ev := st.Next(t, 20*time.Second)
	for ev.Name == "lease" { // the lease's holds changing
		ev = st.Next(t, 20*time.Second)
	}
	if ev.Name != "lost-hold" || ev.Data["kind"] != "lock" {
		t.Fatalf("lease stream after the cut: %+v, want lost-hold", ev)
	}
	if ev := sess.Next(t, 20*time.Second); sidecartest.Str(ev.Data["state"]) != "suspended" {
		t.Fatalf("session stream: %+v, want suspended", ev)
	}
	cut.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
	select {
	case r := <-got:
		if r == nil || r.Status != http.StatusCreated {
			t.Fatalf("contender on the other sidecar: %+v", r)
		}
		if sidecartest.Num(r.Body["fencingToken"]) <= sidecartest.Num(g.Body["fencingToken"]) {
			t.Fatalf("new token %v not above the lost one %v", r.Body["fencingToken"], g.Body["fencingToken"])
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the other sidecar was never granted the lock")
	}

	// Once the network is back ZooKeeper tells the cut sidecar its session expired;
	// it gets a new session and serves again.
	proxy.Restore()
	if ev := sess.Next(t, 20*time.Second); sidecartest.Str(ev.Data["state"]) != "lost" {
		t.Fatalf("session stream after the restore: %+v, want lost", ev)
	}
	for ev := st.Next(t, 20*time.Second); ev.Name != "lost"; ev = st.Next(t, 20*time.Second) {
		if ev.Name != "lease" {
			t.Fatalf("lease stream after the restore: %+v, want lost", ev)
		}
	}
	r, err := cut.Do(context.Background(), http.MethodGet, "/v1/leases/"+lease, nil)
	if err != nil || r.Status != http.StatusNotFound {
		t.Fatalf("lease after loss: %v %+v", err, r)
	}
	cut.WaitReady(t)
	s := cut.Must(t, http.StatusOK, http.MethodGet, "/v1/session")
	if sidecartest.Str(s.Body["state"]) != "connected" {
		t.Fatalf("session after restore: %s", s.Raw)
	}
}

// A cut shorter than the session timeout keeps the session and its grants: the
// session stream says `suspended` then `reconnected`, while suspended the
// election stream shows the leader it last knew, marked suspended, and /readyz
// stays 200 (the suspension is shorter than --suspend-wait).
func TestShortCutSuspendsThenReconnects(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	car := sidecartest.Start(t, []string{proxy.Addr()}, root, "--session-timeout", "6s")
	sess := car.OpenStream(t, "/v1/session/events")
	if ev := sess.Next(t, 5*time.Second); ev.Name != "session" || sidecartest.Str(ev.Data["state"]) != "connected" {
		t.Fatalf("first session event %+v", ev)
	}
	before := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	g := sidecartest.Campaign(t, car, "cut", "c1", "ttl=60s")
	elec := &sidecartest.LeaderFollower{St: car.OpenStream(t, "/v1/elections/cut/events")}
	term := elec.Await(t, "c1", 0, 5*time.Second)

	proxy.Cut()
	if ev := sess.Next(t, 10*time.Second); sidecartest.Str(ev.Data["state"]) != "suspended" {
		t.Fatalf("after the cut: %+v, want suspended", ev)
	}
	ev := elec.St.Next(t, 10*time.Second)
	if l, _ := ev.Data["leader"].(map[string]any); ev.Data["suspended"] != true || sidecartest.Str(l["candidate"]) != "c1" || sidecartest.Num(l["term"]) != term {
		t.Fatalf("election event while suspended: %+v, want the last known leader, suspended", ev)
	}
	elec.CheckID(t, ev) // no newer change, yet a newer id
	// Suspended for less than --suspend-wait (the session timeout): still ready.
	if r, err := car.Do(context.Background(), http.MethodGet, "/readyz", nil); err != nil || r.Status != http.StatusOK {
		t.Fatalf("readyz while suspended for less than --suspend-wait: %v %+v", err, r)
	}
	proxy.Restore()
	if ev := sess.Next(t, 10*time.Second); sidecartest.Str(ev.Data["state"]) != "reconnected" {
		t.Fatalf("after the restore: %+v, want reconnected", ev)
	}
	if got := elec.Await(t, "c1", term-1, 10*time.Second); got != term {
		t.Fatalf("term after reconnect %d, want the same %d", got, term)
	}
	after := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	if after != before {
		t.Fatalf("session changed from %s to %s", before, after)
	}
	car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+sidecartest.Str(g.Body["lease"]))
}
