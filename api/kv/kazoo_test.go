package kv_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// kazoo is the Python ZooKeeper client (Debian's python3-kazoo), run through
// testdata/kazoo_peer.py, one command a process.
type kazoo struct {
	t       *testing.T
	python  string
	servers string
}

// newKazoo finds a python3 that imports kazoo: the one on PATH, else
// Debian's (where python3-kazoo installs it).
func newKazoo(t *testing.T, servers []string) *kazoo {
	t.Helper()
	for _, py := range []string{"python3", "/usr/bin/python3"} {
		if err := exec.Command(py, "-c", "import kazoo.client").Run(); err == nil {
			return &kazoo{t: t, python: py, servers: strings.Join(servers, ",")}
		}
	}
	t.Fatal("no python3 imports kazoo: install Debian's python3-kazoo (scripts/deps.sh test)")
	return nil
}

// run runs one command of the peer and decodes its JSON answer.
func (k *kazoo) run(args ...string) map[string]any {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(60*time.Second))
	defer cancel()
	cmd := exec.CommandContext(ctx, k.python, append([]string{"testdata/kazoo_peer.py", k.servers}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		k.t.Fatalf("kazoo %v: %v\n%s", args, err, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		k.t.Fatalf("kazoo %v answered %q: %v", args, out, err)
	}
	return m
}

// kazoo reads the tree the sidecar writes, as a config tree of plain nodes
// (kazoo get of <root>/kv/config/app/db, its parents listing their children),
// and the sidecar reads what kazoo writes there (makepath parents included),
// in its recursive list too; a recursive delete through the sidecar removes
// kazoo's keys.
func TestKazooReadsAndWritesTheKeyTree(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	kz := newKazoo(t, zkc.Servers())

	car.MustPut(t, "/v1/kv/config/app/db", []byte("postgres://db:5432"), "text/plain")
	car.MustPut(t, "/v1/kv/config/app/db?version=0", []byte("postgres://db2:5432"), "text/plain")
	got := kz.run("get", root+"/kv/config/app/db")
	if got["data"] != "postgres://db2:5432" || sidecartest.Num(got["version"]) != 1 {
		t.Fatalf("kazoo reads %v", got)
	}
	if got := kz.run("get", root+"/kv/config"); got["data"] != "" || sidecartest.Str(got["children"].([]any)[0]) != "app" {
		t.Fatalf("kazoo reads the parent as %v", got)
	}

	// kazoo's writes, through its makepath parents, are keys of the sidecar.
	kz.run("create", root+"/kv/config/web/tls/cert", "PEM")
	if v := kz.run("set", root+"/kv/config/app/db", "postgres://db3:5432"); sidecartest.Num(v["version"]) != 2 {
		t.Fatalf("kazoo's set: %v", v)
	}
	if r := car.Must(t, 200, http.MethodGet, "/v1/kv/config/web/tls/cert"); string(r.Raw) != "PEM" || r.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("kazoo's key: %+v", r)
	}
	if r := car.Must(t, 200, http.MethodGet, "/v1/kv/config/app/db"); string(r.Raw) != "postgres://db3:5432" || r.Header.Get("Version") != "2" {
		t.Fatalf("kazoo's write: %+v", r)
	}
	// Compare-and-set across the two clients: the version is the node's.
	if r, err := car.PutKey(context.Background(), "/v1/kv/config/app/db?version=1", []byte("stale"), "text/plain"); err != nil || r.Status != 409 || sidecartest.Num(r.Body["version"]) != 2 {
		t.Fatalf("a stale compare-and-set after kazoo's write: %v %+v", err, r)
	}
	keys, values := listed(t, car.Must(t, 200, http.MethodGet, "/v1/kv?prefix=config/&recursive=true&values=true"))
	if !slices.Equal(keys, []string{"config/app", "config/app/db", "config/web", "config/web/tls", "config/web/tls/cert"}) || values[1] != "postgres://db3:5432" || values[4] != "PEM" {
		t.Fatalf("the tree: %v %v", keys, values)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/web?recursive=true")
	if keys, _ := listed(t, car.Must(t, 200, http.MethodGet, "/v1/kv?prefix=config/&recursive=true")); !slices.Equal(keys, []string{"config/app", "config/app/db"}) {
		t.Fatalf("after the recursive delete: %v", keys)
	}
}
