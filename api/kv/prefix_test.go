package kv_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// treeWatch reads a prefix stream's events into the state of each key
// ("deleted" once removed), checking that ids increase.
type treeWatch struct {
	t      *testing.T
	st     *sidecartest.Stream
	lastID int64
	state  map[string]string
	// got is the key of every event read, in order.
	got []string
}

func watchTree(t *testing.T, car *sidecartest.Sidecar, path string) *treeWatch {
	t.Helper()
	w := &treeWatch{t: t, st: car.OpenStream(t, path), state: map[string]string{}}
	t.Cleanup(w.st.Cancel)
	return w
}

// until reads events until the keys' states are want's (the others as they may be).
func (w *treeWatch) until(want map[string]string) {
	w.t.Helper()
	deadline := time.Now().Add(testutil.Patience(20 * time.Second))
	for !w.has(want) {
		w.next(time.Until(deadline))
	}
}

// next reads one event into the states.
func (w *treeWatch) next(within time.Duration) {
	w.t.Helper()
	{
		ev := w.st.Next(w.t, within)
		if ev.Name != "kv" {
			w.t.Fatalf("event %q", ev.Name)
		}
		id, err := strconv.ParseInt(ev.ID, 10, 64)
		if err != nil || id <= w.lastID {
			w.t.Fatalf("id %q after %d", ev.ID, w.lastID)
		}
		w.lastID = id
		key := sidecartest.Str(ev.Data["key"])
		if ev.Data["deleted"] == true {
			w.state[key] = "deleted"
		} else {
			w.state[key] = sidecartest.Str(ev.Data["value"])
		}
		w.got = append(w.got, key)
	}
}

func (w *treeWatch) has(want map[string]string) bool {
	for k, v := range want {
		if w.state[k] != v {
			return false
		}
	}
	return true
}

func (w *treeWatch) keys() []string {
	var ks []string
	for k := range w.state {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// The prefix stream: first every key under the prefix as it is, then every
// change under it, whoever made it (another sidecar, kazoo), deletions as
// "deleted":true, keys made later included, nothing outside the prefix; a
// stream opened again starts with the current state again. /v1/kv/events is
// the stream only for GET: a key "events" is written and deleted there.
func TestPrefixStream(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)
	kz := newKazoo(t, zkc.Servers())
	a.MustPut(t, "/v1/kv/config/app/db", []byte("postgres"), "text/plain")
	a.MustPut(t, "/v1/kv/config/app/pool", []byte("10"), "text/plain")
	a.MustPut(t, "/v1/kv/other", []byte("x"), "text/plain")
	a.MustPut(t, "/v1/kv/events", []byte("a key named events"), "text/plain")

	w := watchTree(t, a, "/v1/kv/events?prefix=config/")
	w.until(map[string]string{"config/app": "", "config/app/db": "postgres", "config/app/pool": "10"})

	b.MustPut(t, "/v1/kv/config/web/port", []byte("8080"), "text/plain")
	w.until(map[string]string{"config/web": "", "config/web/port": "8080"})
	b.MustPut(t, "/v1/kv/config/app/db", []byte("postgres2"), "text/plain")
	w.until(map[string]string{"config/app/db": "postgres2"})
	kz.run("create", root+"/kv/config/kz/x", "from kazoo")
	w.until(map[string]string{"config/kz": "", "config/kz/x": "from kazoo"})
	kz.run("set", root+"/kv/config/app/db", "kazoo's db")
	w.until(map[string]string{"config/app/db": "kazoo's db"})
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/app/pool")
	w.until(map[string]string{"config/app/pool": "deleted"})
	kz.run("delete", root+"/kv/config/kz")
	w.until(map[string]string{"config/kz": "deleted", "config/kz/x": "deleted"})
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/web?recursive=true")
	w.until(map[string]string{"config/web": "deleted", "config/web/port": "deleted"})
	if got := fmt.Sprint(w.keys()); got != "[config/app config/app/db config/app/pool config/kz config/kz/x config/web config/web/port]" {
		t.Fatalf("keys seen: %s", got)
	}

	// Opened again: the current state of every key under the prefix.
	again := watchTree(t, b, "/v1/kv/events?prefix=config/app")
	again.until(map[string]string{"config/app": "", "config/app/db": "kazoo's db"})

	// The key named events is still a key for PUT and DELETE.
	if r := a.Must(t, 200, http.MethodGet, "/v1/kv?prefix=events&values=true"); !contains(r.Raw, "a key named events") {
		t.Fatalf("the key events: %s", r.Raw)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/events")
}

func contains(b []byte, s string) bool { return strings.Contains(string(b), s) }

// A prefix stream under a scoped token carries only the keys it may read.
func TestPrefixStreamToken(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`{"tokens":[{"name":"all","token":"token-for-all-0123","allow":["*"]},{"name":"cfg","token":"token-for-cfg-0123","allow":["kv/config/app/*"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	car := sidecartest.Start(t, zkc.Servers(), root, "--tokens-file", file)
	all, cfg := car.As(sidecartest.Bearer("token-for-all-0123")...), car.As(sidecartest.Bearer("token-for-cfg-0123")...)
	all.MustPut(t, "/v1/kv/config/secret", []byte("s"), "text/plain")
	all.MustPut(t, "/v1/kv/config/app/db", []byte("d"), "text/plain")
	w := watchTree(t, cfg, "/v1/kv/events?prefix=config/")
	w.until(map[string]string{"config/app/db": "d"})
	all.MustPut(t, "/v1/kv/config/secret2", []byte("s"), "text/plain")
	all.MustPut(t, "/v1/kv/config/app/db", []byte("d2"), "text/plain")
	w.until(map[string]string{"config/app/db": "d2"})
	if got := fmt.Sprint(w.keys()); got != "[config/app/db]" {
		t.Fatalf("the token saw %s", got)
	}
}
