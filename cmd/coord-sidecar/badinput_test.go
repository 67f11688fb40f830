package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Every bad input gets its 4xx problem document and leaves the ZooKeeper tree
// exactly as it was: the same nodes with the same data and versions.
func TestBadInputsAreRejectedWithoutTouchingZooKeeper(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	open := startSidecar(t, zkc.Servers(), root, "--max-wait", "1m", "--max-body", "1024")
	guarded := startSidecar(t, zkc.Servers(), root, "--token", "s3cret")
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	// A live lease and a held lock, so that the tree has something to keep.
	lease := str(open.must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	open.must(t, http.StatusCreated, http.MethodPost, "/v1/locks/held?lease="+lease)
	before := zktest.Snapshot(t, conn, root)

	long := strings.Repeat("a", 129)
	cases := []struct {
		name, method, path string
		body               []byte
		header             []string
		car                *sidecar
		status             int
		problem            string
	}{
		{"dot-dot name", "POST", "/v1/locks/..", nil, nil, open, 400, "invalid-name"},
		{"dot name", "GET", "/v1/locks/.", nil, nil, open, 400, "invalid-name"},
		{"leading dash", "POST", "/v1/locks/-x", nil, nil, open, 400, "invalid-name"},
		{"leading underscore", "POST", "/v1/locks/_c_x", nil, nil, open, 400, "invalid-name"},
		{"encoded slash", "POST", "/v1/locks/a%2Fb", nil, nil, open, 400, "invalid-name"},
		{"space", "POST", "/v1/locks/a%20b", nil, nil, open, 400, "invalid-name"},
		{"unicode", "POST", "/v1/locks/%C3%A9t%C3%A9", nil, nil, open, 400, "invalid-name"},
		{"over-long name", "POST", "/v1/locks/" + long, nil, nil, open, 400, "invalid-name"},
		{"over-long name on GET", "GET", "/v1/locks/" + long, nil, nil, open, 400, "invalid-name"},
		{"bad wait", "POST", "/v1/locks/x?wait=soon", nil, nil, open, 400, "invalid-parameter"},
		{"negative wait", "POST", "/v1/locks/x?wait=-1s", nil, nil, open, 400, "invalid-parameter"},
		{"wait above max", "POST", "/v1/locks/x?wait=2m", nil, nil, open, 400, "invalid-parameter"},
		{"bad ttl", "POST", "/v1/locks/x?ttl=forever", nil, nil, open, 400, "invalid-parameter"},
		{"negative ttl", "POST", "/v1/locks/x?ttl=-5s", nil, nil, open, 400, "invalid-parameter"},
		{"ttl below 1s", "POST", "/v1/locks/x?ttl=10ms", nil, nil, open, 400, "invalid-parameter"},
		{"ttl above max", "POST", "/v1/locks/x?ttl=1000h", nil, nil, open, 400, "invalid-parameter"},
		{"ttl with lease", "POST", "/v1/locks/x?ttl=5s&lease=" + lease, nil, nil, open, 400, "invalid-parameter"},
		{"over-long owner", "POST", "/v1/locks/x?owner=" + strings.Repeat("o", 257), nil, nil, open, 400, "invalid-parameter"},
		{"unknown lease on acquire", "POST", "/v1/locks/x?lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"bad lease name on acquire", "POST", "/v1/locks/x?lease=a/b", nil, nil, open, 400, "invalid-name"},
		{"unknown lease on release", "DELETE", "/v1/locks/held?lease=nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"release without lease", "DELETE", "/v1/locks/held", nil, nil, open, 400, "invalid-parameter"},
		{"release not held", "DELETE", "/v1/locks/other?lease=" + lease, nil, nil, open, 404, "not-held"},
		{"unknown lease get", "GET", "/v1/leases/nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"unknown lease keepalive", "POST", "/v1/leases/nosuchlease/keepalive", nil, nil, open, 404, "lease-not-found"},
		{"unknown lease revoke", "DELETE", "/v1/leases/nosuchlease", nil, nil, open, 404, "lease-not-found"},
		{"unknown lease stream", "GET", "/v1/leases/nosuchlease/events", nil, nil, open, 404, "lease-not-found"},
		{"bad lease ttl", "POST", "/v1/leases?ttl=1", nil, nil, open, 400, "invalid-parameter"},
		{"oversized body", "POST", "/v1/locks/x", bytes.Repeat([]byte("x"), 4096), nil, open, 413, "body-too-large"},
		{"oversized body on lease", "POST", "/v1/leases", bytes.Repeat([]byte("x"), 4096), nil, open, 413, "body-too-large"},
		{"unknown route", "GET", "/v1/nothing", nil, nil, open, 404, "not-found"},
		{"wrong method", "PATCH", "/v1/locks/x", nil, nil, open, 405, "method-not-allowed"},
		{"missing token", "POST", "/v1/locks/x", nil, nil, guarded, 401, "unauthorized"},
		{"wrong token", "POST", "/v1/locks/x", nil, []string{"Authorization", "Bearer nope"}, guarded, 401, "unauthorized"},
		{"token without Bearer", "POST", "/v1/leases", nil, []string{"Authorization", "s3cret"}, guarded, 401, "unauthorized"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body *bytes.Reader
			if c.body != nil {
				body = bytes.NewReader(c.body)
			} else {
				body = bytes.NewReader(nil)
			}
			r, err := c.car.do(context.Background(), c.method, c.path, body, c.header...)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Raw)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q", ct)
			}
			if got := str(r.Body["type"]); !strings.HasSuffix(got, "/problems/"+c.problem) {
				t.Fatalf("type %q, want .../problems/%s: %s", got, c.problem, r.Raw)
			}
			if num(r.Body["status"]) != int64(c.status) || str(r.Body["title"]) == "" || str(r.Body["detail"]) == "" {
				t.Fatalf("incomplete problem document: %s", r.Raw)
			}
		})
	}
	if d := zktest.SnapshotDiff(before, zktest.Snapshot(t, conn, root)); d != "" {
		t.Fatalf("the ZooKeeper tree changed:\n%s", d)
	}
	// The right token passes; healthz and readyz stay open.
	guarded.must(t, http.StatusOK, http.MethodGet, "/healthz")
	guarded.must(t, http.StatusOK, http.MethodGet, "/readyz")
	r, err := guarded.do(context.Background(), http.MethodGet, "/v1/session", nil, "Authorization", "Bearer s3cret")
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("with the token: %v %+v", err, r)
	}
}
