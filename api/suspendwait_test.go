package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// awaitSessionState waits until GET /v1/session (the sidecar's own view, no
// ZooKeeper call) reports state.
func awaitSessionState(t *testing.T, car *sidecartest.Sidecar, state string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "session "+state, func() bool {
		r, err := car.Do(context.Background(), http.MethodGet, "/v1/session", nil)
		return err == nil && r.Status == http.StatusOK && sidecartest.Str(r.Body["state"]) == state
	})
}

// Requests without wait= sent while the sidecar's connection to ZooKeeper is
// cut (the session suspended, not lost) wait for it to come back and then
// succeed, each having written once: one lock node, a key at version 0, a
// counter at 1, one queue item. A read waits likewise.
func TestRequestsWaitThroughASuspension(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	// A session timeout long enough that the cut below never costs the
	// session (it is abandoned after 9/10 of it without an answer).
	car := sidecartest.Start(t, []string{proxy.Addr()}, root, "--session-timeout", "20s", "--suspend-wait", "60s")
	car.Must(t, http.StatusOK, http.MethodPut, "/v1/kv/before") // the kv's parents exist
	proxy.Cut()
	awaitSessionState(t, car, "suspended")

	type call struct {
		method, path, body string
		want               int
	}
	calls := []call{
		{http.MethodPost, "/v1/locks/once?ttl=60s&owner=waiter", "", http.StatusCreated},
		{http.MethodPut, "/v1/kv/once", "v", http.StatusOK},
		{http.MethodPost, "/v1/counters/once", "", http.StatusOK},
		{http.MethodPost, "/v1/queues/once/items", "item", http.StatusCreated},
		{http.MethodGet, "/v1/kv/before", "", http.StatusOK},
	}
	answers := make([]*sidecartest.Response, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	for i, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body io.Reader
			var hdr []string
			if c.body != "" {
				body, hdr = strings.NewReader(c.body), []string{"Content-Type", "text/plain"}
			}
			answers[i], errs[i] = car.Do(context.Background(), c.method, c.path, body, hdr...)
		}()
	}
	// The requests are under way while the connection is away: none answers
	// before it is back (an answer now would be a failure).
	testutil.Eventually(t, 30*time.Second, "every request waiting", func() bool {
		return waitsUnderWay(t, car) >= len(calls)
	})
	proxy.Restore()
	wg.Wait()
	for i, c := range calls {
		if errs[i] != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, errs[i])
		}
		if answers[i].Status != c.want {
			t.Fatalf("%s %s: %d, want %d: %s", c.method, c.path, answers[i].Status, c.want, answers[i].Raw)
		}
	}
	if s := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["state"]); s != "connected" {
		t.Fatalf("session %s after the cut, want connected (the same session)", s)
	}

	// Each wrote once.
	conn := zktest.Connect(t, zkc.Servers(), 10*time.Second)
	locks, _, err := conn.Children(root + "/locks/once")
	if err != nil || len(locks) != 1 {
		t.Fatalf("lock nodes %v (%v), want one", locks, err)
	}
	r, err := car.Do(context.Background(), http.MethodGet, "/v1/kv/once", nil)
	if err != nil || r.Status != http.StatusOK || r.Header.Get("Version") != "0" {
		t.Fatalf("key after one put: %v %+v, want version 0", err, r)
	}
	if v := sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/counters/once").Body["value"]); v != 1 {
		t.Fatalf("counter %d after one add, want 1", v)
	}
	if n := sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/queues/once").Body["length"]); n != 1 {
		t.Fatalf("queue of %d items after one enqueue, want 1", n)
	}
	if n := suspensionWaits(t, car, "back"); n < float64(len(calls)) {
		t.Fatalf("coord_request_suspension_wait_seconds_count{outcome=\"back\"} = %v, want at least %d", n, len(calls))
	}
}

// A request whose wait for the connection outlasts --suspend-wait answers
// 503 zookeeper-unavailable with Retry-After, and its detail names the
// server tried and the last error.
func TestSuspensionLongerThanSuspendWaitAnswers503(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", "20s", "--suspend-wait", "500ms")
	proxy.Cut()
	awaitSessionState(t, car, "suspended")
	r, err := car.Do(context.Background(), http.MethodPut, "/v1/kv/late", strings.NewReader("v"), "Content-Type", "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	detail := sidecartest.Str(r.Body["detail"])
	if r.Status != http.StatusServiceUnavailable || !strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/zookeeper-unavailable") ||
		r.Header.Get("Retry-After") == "" {
		t.Fatalf("put while suspended past --suspend-wait: %d %s", r.Status, r.Raw)
	}
	for _, want := range []string{"did not come back", proxy.Addr(), "last error"} {
		if !strings.Contains(detail, want) {
			t.Fatalf("detail %q does not say %q", detail, want)
		}
	}
	if n := suspensionWaits(t, car, "timeout"); n < 1 {
		t.Fatalf("no wait counted as timed out")
	}
	proxy.Restore()
	awaitSessionState(t, car, "connected")
	car.Must(t, http.StatusOK, http.MethodPut, "/v1/kv/late")
}

// /readyz stays 200 while the session is suspended for less than
// --suspend-wait, then answers 503 until the connection is back.
func TestReadyzThroughASuspension(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", "30s", "--suspend-wait", "10s")
	proxy.Cut()
	awaitSessionState(t, car, "suspended")
	car.Must(t, http.StatusOK, http.MethodGet, "/readyz") // well within 10 s of the cut
	testutil.Eventually(t, 30*time.Second, "readyz 503 past --suspend-wait", func() bool {
		r, err := car.Do(context.Background(), http.MethodGet, "/readyz", nil)
		return err == nil && r.Status == http.StatusServiceUnavailable && r.Header.Get("Retry-After") != "" &&
			strings.Contains(sidecartest.Str(r.Body["detail"]), "suspended since")
	})
	proxy.Restore()
	car.WaitReady(t)
	if s := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["state"]); s != "connected" {
		t.Fatalf("session %s after the cut, want connected (the same session)", s)
	}
}

// waitsUnderWay is how many requests wait for the connection right now.
func waitsUnderWay(t *testing.T, car *sidecartest.Sidecar) int {
	t.Helper()
	return int(sidecartest.MetricValue(t, car, "coord_request_suspension_waiting"))
}

// suspensionWaits is coord_request_suspension_wait_seconds_count for outcome.
func suspensionWaits(t *testing.T, car *sidecartest.Sidecar, outcome string) float64 {
	t.Helper()
	return sidecartest.MetricValue(t, car, `coord_request_suspension_wait_seconds_count{outcome="`+outcome+`"}`)
}
