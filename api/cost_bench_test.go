package api_test

// Per-route cost (issue 41; docs/BENCHMARKS.md, "Per-route cost"): each hot
// route served by the real handler (registry.New over real recipes, a real
// ZooKeeper session from zktest.Shared, the process's JSON request log and a
// Prometheus registry, as the sidecar runs them), called in the benchmark's
// goroutine through ServeHTTP with no socket in between, one request after the
// other. The allocations and bytes per operation (-benchmem) do not depend on
// the machine's load, so they compare one cut with the next on a busy machine;
// ns/op includes the ZooKeeper round trips of the route and is as noisy as the
// machine. The harness row is what building a request and a recorder costs
// (every other row includes it).
//
// Run: go test -run '^$' -bench RouteCost -benchmem ./api/

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	coordsidecar "github.com/coord-sidecar/coord-sidecar"
	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/registry"
	"github.com/coord-sidecar/coord-sidecar/internal/jsonlog"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// costServer is the real handler over a real session, and the context the
// sidecar's http.Server gives every request (Server.BaseContext).
type costServer struct {
	h    http.Handler
	base context.Context
}

func newCostServer(b *testing.B) *costServer {
	b.Helper()
	zkc := zktest.Shared(b)
	log := slog.New(jsonlog.New(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := prometheus.NewRegistry()
	sess, err := zookeeper.NewSession(zookeeper.Config{Servers: zkc.Servers(), Timeout: 10 * time.Second,
		Root: zktest.Root(b), Logger: log, Registerer: reg})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sess.Close)
	deadline := time.After(30 * time.Second)
	for sess.State() != zookeeper.StateConnected {
		select {
		case <-sess.Changed():
		case <-deadline:
			b.Fatalf("no ZooKeeper session within 30s: %s", sess.State())
		}
	}
	leases := kit.NewLeases(sess, reg)
	b.Cleanup(leases.Close)
	srv := registry.New(api.Options{Session: sess, Leases: leases, Spec: coordsidecar.OpenAPI, Logger: log,
		Registerer: reg, Gatherer: reg})
	b.Cleanup(srv.Close)
	b.Cleanup(srv.CloseRecipes)
	return &costServer{h: srv.Handler(), base: srv.BaseContext(nil)}
}

// do serves one request and returns the recorder; a status other than want
// fails the benchmark.
func (c *costServer) do(b *testing.B, method, target, body string, want int) *httptest.ResponseRecorder {
	var r *http.Request
	if body == "" {
		r = httptest.NewRequestWithContext(c.base, method, target, nil)
	} else {
		r = httptest.NewRequestWithContext(c.base, method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	r.Host = "localhost"
	w := httptest.NewRecorder()
	c.h.ServeHTTP(w, r)
	if w.Code != want {
		b.Fatalf("%s %s: %d, want %d: %s", method, target, w.Code, want, w.Body.String())
	}
	return w
}

// field is a string member of a small JSON answer, found without decoding it
// (the harness's cost stays out of the rows).
func field(b *testing.B, w *httptest.ResponseRecorder, name string) string {
	s := w.Body.String()
	key := `"` + name + `":"`
	i := strings.Index(s, key)
	if i < 0 {
		b.Fatalf("no %s in %s", name, s)
	}
	s = s[i+len(key):]
	return s[:strings.IndexByte(s, '"')]
}

// BenchmarkRouteCost: one row per hot route; a lock or permit row's op is a
// whole cycle (acquire then release: two requests).
func BenchmarkRouteCost(b *testing.B) {
	c := newCostServer(b)
	lease := func(b *testing.B) string {
		return field(b, c.do(b, http.MethodPost, "/v1/leases?ttl=60s", "", http.StatusCreated), "lease")
	}
	b.Run("harness", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			r := httptest.NewRequestWithContext(c.base, http.MethodGet, "/v1/session", nil)
			r.Host = "localhost"
			w := httptest.NewRecorder()
			w.WriteHeader(http.StatusOK)
		}
	})
	b.Run("session", func(b *testing.B) { // no ZooKeeper call: the request path alone
		b.ReportAllocs()
		for b.Loop() {
			c.do(b, http.MethodGet, "/v1/session", "", http.StatusOK)
		}
	})
	b.Run("lock-cycle-implicit-lease", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w := c.do(b, http.MethodPost, "/v1/locks/cost-implicit", "", http.StatusCreated)
			c.do(b, http.MethodDelete, "/v1/locks/cost-implicit?lease="+field(b, w, "lease"), "", http.StatusNoContent)
		}
	})
	b.Run("lock-cycle-wait", func(b *testing.B) { // as coord-bench's lock rows: a long-poll (wait=), its slot
		b.ReportAllocs()
		for b.Loop() {
			w := c.do(b, http.MethodPost, "/v1/locks/cost-wait?wait=30s", "", http.StatusCreated)
			c.do(b, http.MethodDelete, "/v1/locks/cost-wait?lease="+field(b, w, "lease"), "", http.StatusNoContent)
		}
	})
	b.Run("lock-cycle-explicit-lease", func(b *testing.B) {
		l := lease(b)
		acquire, release := "/v1/locks/cost-explicit?lease="+l, "/v1/locks/cost-explicit?lease="+l
		b.ReportAllocs()
		for b.Loop() {
			c.do(b, http.MethodPost, acquire, "", http.StatusCreated)
			c.do(b, http.MethodDelete, release, "", http.StatusNoContent)
		}
	})
	b.Run("lease-keepalive", func(b *testing.B) {
		target := "/v1/leases/" + lease(b) + "/keepalive"
		b.ReportAllocs()
		for b.Loop() {
			c.do(b, http.MethodPost, target, "", http.StatusOK)
		}
	})
	b.Run("kv-put", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c.do(b, http.MethodPut, "/v1/kv/cost-key", `{"n":1}`, http.StatusOK)
		}
	})
	b.Run("kv-get", func(b *testing.B) {
		c.do(b, http.MethodPut, "/v1/kv/cost-key", `{"n":1}`, http.StatusOK)
		b.ReportAllocs()
		for b.Loop() {
			c.do(b, http.MethodGet, "/v1/kv/cost-key", "", http.StatusOK)
		}
	})
	b.Run("semaphore-cycle", func(b *testing.B) {
		l := lease(b)
		b.ReportAllocs()
		for b.Loop() {
			w := c.do(b, http.MethodPost, "/v1/semaphores/cost-sem/permits?max=4&lease="+l, "", http.StatusCreated)
			c.do(b, http.MethodDelete, "/v1/semaphores/cost-sem/permits/"+field(b, w, "permit")+"?lease="+l, "", http.StatusNoContent)
		}
	})
}
