package kv_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// resumeWatch opens the prefix stream with Last-Event-ID last and reads it
// until the states are want's, then until a sentinel key put afterwards
// arrives; it answers the keys of the events it got before the sentinel.
func resumeWatch(t *testing.T, car *sidecartest.Sidecar, prefix, last string, want map[string]string, sentinel string) []string {
	t.Helper()
	w := &treeWatch{t: t, st: car.OpenStream(t, "/v1/kv/events?prefix="+prefix, "Last-Event-ID", last), state: map[string]string{}}
	defer w.st.Cancel()
	w.until(want)
	car.MustPut(t, "/v1/kv/"+sentinel, []byte("s"), "text/plain")
	w.until(map[string]string{sentinel: "s"})
	return w.got[:len(w.got)-1]
}

// A prefix stream reopened with the last id it got resumes: it sends only
// what changed meanwhile (changed values, new nested keys, deletions), not
// the keys left as they were; an id the sidecar cannot serve (one it never
// gave, another sidecar process's) gets the full current state instead.
func TestPrefixStreamResumes(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)
	for k, v := range map[string]string{"config/app/db": "pg", "config/app/pool": "10", "config/keep": "k", "config/gone/x": "x"} {
		a.MustPut(t, "/v1/kv/"+k, []byte(v), "text/plain")
	}
	w := watchTree(t, a, "/v1/kv/events?prefix=config/")
	w.until(map[string]string{"config/app": "", "config/app/db": "pg", "config/app/pool": "10", "config/keep": "k", "config/gone": "", "config/gone/x": "x"})
	last := strconv.FormatInt(w.lastID, 10)
	w.st.Cancel()

	// Changes while disconnected: through another sidecar, nested, deletions.
	b.MustPut(t, "/v1/kv/config/app/db", []byte("pg2"), "text/plain")
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/app/pool")
	b.MustPut(t, "/v1/kv/config/new/deep/x", []byte("n"), "text/plain")
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/config/gone?recursive=true")
	want := map[string]string{"config/app/db": "pg2", "config/app/pool": "deleted", "config/new": "", "config/new/deep": "",
		"config/new/deep/x": "n", "config/gone": "deleted", "config/gone/x": "deleted"}

	got := resumeWatch(t, a, "config/", last, want, "config/sentinel1")
	seen := map[string]bool{}
	for _, k := range got {
		seen[k] = true
		if _, changed := want[k]; !changed {
			t.Errorf("the resumed stream sent %s, which did not change (events: %v)", k, got)
		}
	}
	for k := range want {
		if !seen[k] {
			t.Errorf("the resumed stream never sent %s (events: %v)", k, got)
		}
	}
	if reconnects := sidecartest.MetricValue(t, a, `coord_kv_prefix_reconnects_total{resumed="true"}`); reconnects != 1 {
		t.Errorf(`coord_kv_prefix_reconnects_total{resumed="true"} = %v, want 1`, reconnects)
	}

	// Ids it cannot serve: the full state (every key, unchanged ones too).
	full := map[string]string{"config/app": "", "config/app/db": "pg2", "config/keep": "k", "config/new/deep/x": "n"}
	for i, id := range []string{"12345", "not-a-number"} {
		got := resumeWatch(t, a, "config/", id, full, fmt.Sprintf("config/sentinel-full%d", i))
		if len(got) < 6 {
			t.Errorf("Last-Event-ID %s: %v, want the full state", id, got)
		}
	}
	// Another sidecar process does not know a's ids.
	if got := resumeWatch(t, b, "config/", last, full, "config/sentinel-b"); len(got) < 6 {
		t.Errorf("another sidecar with a's id: %v, want the full state", got)
	}
	if n := sidecartest.MetricValue(t, a, `coord_kv_prefix_reconnects_total{resumed="false"}`); n != 2 {
		t.Errorf(`coord_kv_prefix_reconnects_total{resumed="false"} = %v, want 2`, n)
	}
}

// One change under a prefix of many keys costs the streaming sidecar a few
// ZooKeeper requests, not one per key: counted on its session's connection.
func TestPrefixStreamChangeReadsOnlyTheChange(t *testing.T) {
	const keys = 1000
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers()[:1], root), sidecartest.Start(t, zkc.Servers(), root)
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				if r, err := b.PutKey(context.Background(), fmt.Sprintf("/v1/kv/big/k%04d", i), []byte("v"), "text/plain"); err != nil || r.Status != http.StatusOK {
					t.Errorf("put %d: %v %v", i, r, err)
				}
			}
		})
	}
	for i := range keys {
		work <- i
	}
	close(work)
	wg.Wait()
	w := watchTree(t, a, "/v1/kv/events?prefix=big/")
	all := map[string]string{}
	for i := range keys {
		all[fmt.Sprintf("big/k%04d", i)] = "v"
	}
	w.until(all)

	sid := sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	server := zkc.Server(0)
	before := zktest.Received(t, server, sid)
	b.MustPut(t, "/v1/kv/big/k0500", []byte("changed"), "text/plain")
	w.until(map[string]string{"big/k0500": "changed"})
	b.MustPut(t, "/v1/kv/big/new", []byte("new"), "text/plain")
	w.until(map[string]string{"big/new": "new"})
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/big/k0001")
	w.until(map[string]string{"big/k0001": "deleted"})
	got := zktest.Received(t, server, sid) - before
	t.Logf("%d requests (pings included) for a change, a new key and a deletion among %d keys", got, keys)
	if got >= keys/10 {
		t.Fatalf("the streaming sidecar sent %d requests for three changes among %d keys", got, keys)
	}
}
