package kv_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// listed is a list answer's keys, in order, with their values ("" when the
// item has none; "b64:" and the base64 for valueBase64).
func listed(t *testing.T, r *sidecartest.Response) ([]string, []string) {
	t.Helper()
	items, ok := r.Body["kv"].([]any)
	if !ok {
		t.Fatalf("no kv field: %s", r.Raw)
	}
	if _, old := r.Body["keys"]; old {
		t.Fatalf("the list still has the field keys: %s", r.Raw)
	}
	var keys, values []string
	for _, it := range items {
		m, _ := it.(map[string]any)
		keys = append(keys, sidecartest.Str(m["key"]))
		v := sidecartest.Str(m["value"])
		if b, ok := m["valueBase64"]; ok {
			v = "b64:" + sidecartest.Str(b)
		}
		values = append(values, v)
	}
	return keys, values
}

// Keys with "/" over HTTP, with plain slashes: every key operation works on
// them (put, compare-and-set, get, long-poll, the key's stream, delete), the
// tree is nested nodes, a parent reads as an empty value, a ninth segment is
// 400 invalid-name, and a key whose last segment is "events" is read with its
// last slash encoded.
func TestNestedKeyOperations(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)
	ctx := context.Background()
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	r := a.MustPut(t, "/v1/kv/config/app/db?version=-1", []byte("postgres://db:5432"), "text/plain")
	if sidecartest.Str(r.Body["key"]) != "config/app/db" || sidecartest.Num(r.Body["version"]) != 0 {
		t.Fatalf("put: %s", r.Raw)
	}
	if data, _, err := conn.Get(root + "/kv/config/app/db"); err != nil || string(data) != "postgres://db:5432" {
		t.Fatalf("node: %q %v", data, err)
	}
	g := b.Must(t, 200, http.MethodGet, "/v1/kv/config/app/db")
	if string(g.Raw) != "postgres://db:5432" || g.Header.Get("Version") != "0" || g.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("get: %+v", g)
	}
	if g := b.Must(t, 200, http.MethodGet, "/v1/kv/config/app"); len(g.Raw) != 0 || g.Header.Get("Version") != "0" {
		t.Fatalf("a parent: %+v", g)
	}
	st := b.OpenStream(t, "/v1/kv/config/app/db/events")
	defer st.Cancel()
	expectFields(t, "first event", st.Next(t, 10*time.Second).Data, map[string]any{"key": "config/app/db", "value": "postgres://db:5432", "version": 0})
	if p, err := a.PutKey(ctx, "/v1/kv/config/app/db?version=7", []byte("x"), "text/plain"); err != nil || p.Status != 409 || sidecartest.Num(p.Body["version"]) != 0 {
		t.Fatalf("stale compare-and-set: %v %+v", err, p)
	}
	a.MustPut(t, "/v1/kv/config/app/db?version=0", []byte("postgres://db2:5432"), "text/plain")
	expectFields(t, "change", st.Next(t, 10*time.Second).Data, map[string]any{"key": "config/app/db", "value": "postgres://db2:5432", "version": 1})
	if g := b.Must(t, 200, http.MethodGet, "/v1/kv/config/app/db?version=0&wait=10s"); g.Header.Get("Version") != "1" {
		t.Fatalf("long-poll: %+v", g)
	}
	// A key holds a value and has children.
	a.MustPut(t, "/v1/kv/config/app", []byte("app-v1"), "text/plain")
	sidecartest.ProblemIs(t, a.Must(t, 409, http.MethodDelete, "/v1/kv/config/app"), 409, "key-has-children")
	// Names: each segment a name, at most eight.
	for _, bad := range []string{"/v1/kv/a/b/c/d/e/f/g/h/i", "/v1/kv/a//b", "/v1/kv/a/.b", "/v1/kv/a/"} {
		if r, err := a.PutKey(ctx, bad, []byte("x"), "text/plain"); err != nil || r.Status != 400 || !strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/invalid-name") {
			t.Fatalf("PUT %s: %v %+v", bad, err, r)
		}
	}
	a.MustPut(t, "/v1/kv/a/b/c/d/e/f/g/h", []byte("deep"), "text/plain")
	// A key ending in "events": written plainly, read with its last slash encoded.
	a.MustPut(t, "/v1/kv/config/events", []byte("ev"), "text/plain")
	if g := b.Must(t, 200, http.MethodGet, "/v1/kv/config%2Fevents"); string(g.Raw) != "ev" {
		t.Fatalf("config/events: %+v", g)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/events")
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/app/db?version=1")
	expectFields(t, "deletion", st.Next(t, 10*time.Second).Data, map[string]any{"key": "config/app/db", "deleted": true})
	b.Must(t, http.StatusNotFound, http.MethodGet, "/v1/kv/config/app/db")
}

// A leased nested key is in the lease's holds under its full key and
// vanishes with the lease; a key under it is 409 key-leased-parent.
func TestNestedLeasedKey(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	ctx := context.Background()
	lease := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30s").Body["lease"])
	a.MustPut(t, "/v1/kv/workers/web/w7?lease="+lease, []byte("10.0.0.7:8080"), "text/plain")
	holds, _ := a.Must(t, 200, http.MethodGet, "/v1/leases/"+lease).Body["holds"].([]any)
	if len(holds) != 1 || sidecartest.Str(holds[0].(map[string]any)["name"]) != "workers/web/w7" {
		t.Fatalf("holds %v", holds)
	}
	r, err := a.PutKey(ctx, "/v1/kv/workers/web/w7/x", []byte("x"), "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	sidecartest.ProblemIs(t, r, 409, "key-leased-parent")
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/kv/workers/web/w7")
}

// The recursive list: a subtree in full keys, paged with limit/after, with
// values (valueBase64 for bytes that are not UTF-8); one level without
// recursive; a recursive delete removes the subtree and nothing else.
func TestKeyTreeListAndDelete(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)
	a.MustPut(t, "/v1/kv/config/app/db", []byte("postgres"), "text/plain")
	a.MustPut(t, "/v1/kv/config/app/db/pool", []byte("10"), "text/plain")
	a.MustPut(t, "/v1/kv/config/app/cache", []byte{0xff, 0x00}, "application/octet-stream")
	a.MustPut(t, "/v1/kv/config/apps", []byte("x"), "text/plain")
	a.MustPut(t, "/v1/kv/config/web/port", []byte("8080"), "text/plain")

	keys, values := listed(t, b.Must(t, 200, http.MethodGet, "/v1/kv?prefix=config/app/&recursive=true&values=true"))
	if !slices.Equal(keys, []string{"config/app/cache", "config/app/db", "config/app/db/pool"}) ||
		!slices.Equal(values, []string{"b64:/wA=", "postgres", "10"}) {
		t.Fatalf("recursive with values: %v %v", keys, values)
	}
	p1 := b.Must(t, 200, http.MethodGet, "/v1/kv?prefix=config/&recursive=true&limit=3")
	keys, values = listed(t, p1)
	if !slices.Equal(keys, []string{"config/app", "config/app/cache", "config/app/db"}) || values[0] != "" || sidecartest.Str(p1.Body["next"]) != "config/app/db" {
		t.Fatalf("first page: %s", p1.Raw)
	}
	p2 := b.Must(t, 200, http.MethodGet, "/v1/kv?prefix=config/&recursive=true&limit=3&after=config/app/db")
	if keys, _ = listed(t, p2); !slices.Equal(keys, []string{"config/app/db/pool", "config/apps", "config/web"}) {
		t.Fatalf("second page: %s", p2.Raw)
	}
	if keys, _ = listed(t, b.Must(t, 200, http.MethodGet, "/v1/kv?prefix=config/")); !slices.Equal(keys, []string{"config/app", "config/apps", "config/web"}) {
		t.Fatalf("one level: %v", keys)
	}
	sidecartest.ProblemIs(t, a.Must(t, 400, http.MethodDelete, "/v1/kv/config/app?recursive=true&version=0"), 400, "invalid-parameter")
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/app?recursive=true")
	if keys, _ = listed(t, b.Must(t, 200, http.MethodGet, "/v1/kv?recursive=true")); !slices.Equal(keys, []string{"config", "config/apps", "config/web", "config/web/port"}) {
		t.Fatalf("after the recursive delete: %v", keys)
	}
	a.Must(t, http.StatusNotFound, http.MethodDelete, "/v1/kv/config/app?recursive=true")
}

// A token allowed kv/config/* reaches the subtree, and nothing else; the list
// shows it only what it may read.
func TestKeyTreeToken(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`{"tokens":[{"name":"all","token":"token-for-all-0123","allow":["*"]},{"name":"cfg","token":"token-for-cfg-0123","allow":["kv/config/*"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	car := sidecartest.Start(t, zkc.Servers(), root, "--tokens-file", file)
	all, cfg := car.As(sidecartest.Bearer("token-for-all-0123")...), car.As(sidecartest.Bearer("token-for-cfg-0123")...)
	all.MustPut(t, "/v1/kv/secrets/db", []byte("s3cret"), "text/plain")
	cfg.MustPut(t, "/v1/kv/config/app/db", []byte("postgres"), "text/plain")
	cfg.Must(t, 200, http.MethodGet, "/v1/kv/config/app/db")
	st := cfg.OpenStream(t, "/v1/kv/config/app/db/events")
	st.Cancel()
	cfg.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/app?recursive=true")
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/kv/secrets/db"}, {http.MethodGet, "/v1/kv/secrets%2Fdb"}, {http.MethodDelete, "/v1/kv/secrets?recursive=true"},
		{http.MethodGet, "/v1/kv/secrets/db/events"}, {http.MethodGet, "/v1/kv/config"},
	} {
		sidecartest.ProblemIs(t, cfg.Must(t, 403, c.method, c.path), 403, "forbidden")
	}
	if r, err := cfg.PutKey(context.Background(), "/v1/kv/secrets/x", []byte("x"), "text/plain"); err != nil || r.Status != 403 {
		t.Fatalf("put outside: %v %+v", err, r)
	}
	cfg.MustPut(t, "/v1/kv/config/x", []byte("x"), "text/plain")
	if keys, _ := listed(t, cfg.Must(t, 200, http.MethodGet, "/v1/kv?recursive=true")); !slices.Equal(keys, []string{"config/x"}) {
		t.Fatalf("the token's list: %v", keys)
	}
}
