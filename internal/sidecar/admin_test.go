package sidecar_test

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// --admin-listen (issue 40): /healthz, /readyz and /metrics on a listener of
// their own, outside --max-conns, open to any Host (probes and scrapers send
// the pod's address); every other path answers 404 there. With the main
// listener full of connections that send nothing, probes and scrapes are
// still answered.
func TestAdminListener(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--admin-listen", "127.0.0.1:0",
		"--max-conns", "5", "--read-header-timeout", "10m")
	admin := "http://" + car.M.AdminAddr()
	client := &http.Client{Timeout: testutil.Patience(20 * time.Second)}
	get := func(method, url, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, url, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if code, body := get(http.MethodGet, admin+p, "10.1.2.3:9090"); code != http.StatusOK {
			t.Fatalf("admin %s: %d %s", p, code, body)
		}
	}
	for _, p := range []string{"/v1/session", "/openapi.yaml", "/ui", "/", "/v1/locks/x"} {
		if code, body := get(http.MethodGet, admin+p, ""); code != http.StatusNotFound || !strings.Contains(body, "not-found") {
			t.Fatalf("admin %s: %d %s, want 404 not-found", p, code, body)
		}
	}
	if code, _ := get(http.MethodPost, admin+"/healthz", ""); code != http.StatusMethodNotAllowed {
		t.Fatalf("admin POST /healthz: %d, want 405", code)
	}

	// The main listener full of connections that never send a request.
	for range 8 {
		c, err := net.DialTimeout("tcp", car.M.Addr(), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	testutil.Eventually(t, 30*time.Second, "the main listener's 5 places taken", func() bool {
		_, body := get(http.MethodGet, admin+"/metrics", "")
		return strings.Contains(body, `coord_http_connections{state="active"} 5`)
	})
	for _, p := range []string{"/healthz", "/readyz"} {
		if code, body := get(http.MethodGet, admin+p, ""); code != http.StatusOK {
			t.Fatalf("admin %s with the main listener full: %d %s", p, code, body)
		}
	}
}
