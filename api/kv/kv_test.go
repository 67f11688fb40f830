package kv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// expectFields fails t unless each field of data prints as want's (nil: absent).
func expectFields(t testing.TB, what string, data map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		got, ok := data[k]
		if v == nil && !ok {
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(v) {
			t.Fatalf("%s: %s is %v, want %v (all: %v)", what, k, got, v, data)
		}
	}
}

// incrementTally reads the JSON key tally, adds one and writes it back at the
// version read, until a write is not refused; it returns how many were.
func incrementTally(ctx context.Context, car *sidecartest.Sidecar) (refused int, err error) {
	for {
		g, err := car.Do(ctx, http.MethodGet, "/v1/kv/tally", nil)
		if err != nil || g.Status != 200 {
			return refused, fmt.Errorf("get: %v %+v", err, g)
		}
		version, _ := strconv.Atoi(g.Header.Get("Version"))
		var v struct{ N int }
		if err := json.Unmarshal(g.Raw, &v); err != nil || g.Header.Get("Content-Type") != "application/json" {
			return refused, fmt.Errorf("value %q (%s): %v", g.Raw, g.Header.Get("Content-Type"), err)
		}
		body, _ := json.Marshal(map[string]int{"n": v.N + 1})
		p, err := car.PutKey(ctx, fmt.Sprintf("/v1/kv/tally?version=%d", version), body, "application/json")
		switch {
		case err != nil:
			return refused, err
		case p.Status == 200:
			return refused, nil
		case p.Status != 409 || sidecartest.Num(p.Body["version"]) <= int64(version):
			// A refusal carries the current version, newer than the one read.
			return refused, fmt.Errorf("put at version %d: %d %s", version, p.Status, p.Raw)
		}
		refused++
	}
}

// Twenty clients, half on each of two sidecars, each read a JSON counter, add
// one and write it back with version=, retrying on 409: the key ends at exactly
// 20, and every 409 carries the key's current version.
func TestKeyReadModifyWriteThroughTwoSidecars(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}
	ctx := context.Background()
	r, err := cars[0].PutKey(ctx, "/v1/kv/tally?version=-1", []byte(`{"n":0}`), "application/json")
	if err != nil || r.Status != 200 || sidecartest.Num(r.Body["version"]) != 0 {
		t.Fatalf("create: %v %+v", err, r)
	}

	const clients = 20
	var wg sync.WaitGroup
	var mu sync.Mutex
	conflicts := 0
	errs := make(chan error, clients)
	for i := range clients {
		car := cars[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := incrementTally(ctx, car)
			if err != nil {
				errs <- err
			}
			mu.Lock()
			conflicts += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	g := cars[1].Must(t, 200, http.MethodGet, "/v1/kv/tally")
	if string(g.Raw) != `{"n":20}` || g.Header.Get("Version") != "20" {
		t.Fatalf("final value %s at version %s, want {\"n\":20} at 20", g.Raw, g.Header.Get("Version"))
	}
	t.Logf("%d increments, %d stale writes refused and retried", clients, conflicts)
	// A stale version answers 409 version-mismatch with the current one.
	r, err = cars[0].PutKey(ctx, "/v1/kv/tally?version=3", []byte(`{"n":0}`), "application/json")
	if err != nil || r.Status != 409 || sidecartest.Num(r.Body["version"]) != 20 || sidecartest.Str(r.Body["type"]) != "https://coord-sidecar.dev/problems/version-mismatch" {
		t.Fatalf("stale write: %v %+v", err, r)
	}
	r, err = cars[0].PutKey(ctx, "/v1/kv/absent?version=0", []byte(`x`), "text/plain")
	if err != nil || r.Status != 409 || sidecartest.Num(r.Body["version"]) != -1 {
		t.Fatalf("compare-and-set on an absent key: %v %+v", err, r)
	}
}

// A long-poll on one sidecar answers as soon as the other writes; the event
// stream shows the value, each change (text or base64), then the deletion.
func TestKeyLongPollAndEvents(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)
	ctx := context.Background()
	a.MustPut(t, "/v1/kv/flag", []byte(`{"dark":false}`), "application/json")
	// The long-poll waits on a, then b writes.
	type answer struct {
		r   *sidecartest.Response
		err error
		at  time.Time
	}
	got := make(chan answer, 1)
	go func() {
		r, err := a.Do(ctx, http.MethodGet, "/v1/kv/flag?version=0&wait=30s", nil)
		got <- answer{r, err, time.Now()}
	}()
	// The long-poll is the key's only follower on a: it waits once it follows.
	testutil.Eventually(t, 10*time.Second, "the long-poll follows the key", func() bool {
		return sidecartest.Metrics(t, a, "coord_kv_followed_keys")[0] == 1
	})
	wrote := time.Now()
	b.MustPut(t, "/v1/kv/flag", []byte(`{"dark":true}`), "application/json")
	select {
	case ans := <-got:
		if ans.err != nil || ans.r.Status != 200 || string(ans.r.Raw) != `{"dark":true}` || ans.r.Header.Get("Version") != "1" {
			t.Fatalf("long-poll: %v %+v", ans.err, ans.r)
		}
		t.Logf("long-poll answered %s after the write on the other sidecar", ans.at.Sub(wrote))
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not answer within 10s of the write")
	}
	st := a.OpenStream(t, "/v1/kv/flag/events")
	ev := st.Next(t, 10*time.Second)
	if ev.Name != "kv" {
		t.Fatalf("event %q", ev.Name)
	}
	expectFields(t, "first event", ev.Data, map[string]any{"value": `{"dark":true}`, "version": 1, "contentType": "application/json"})
	b.MustPut(t, "/v1/kv/flag", []byte("plain"), "text/plain")
	expectFields(t, "change", st.Next(t, 10*time.Second).Data, map[string]any{"value": "plain", "version": 2, "contentType": "text/plain"})
	b.MustPut(t, "/v1/kv/flag", []byte{0xff, 0xfe, 0x00}, "application/octet-stream")
	expectFields(t, "binary change", st.Next(t, 10*time.Second).Data, map[string]any{"valueBase64": "//4A", "value": nil, "version": 3})
	// A long-poll that sees no change answers 200 unchanged when wait ends.
	if r := a.Must(t, 200, http.MethodGet, "/v1/kv/flag?version=3&wait=100ms"); r.Header.Get("Version") != "3" {
		t.Fatalf("unchanged long-poll: %+v", r)
	}
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/flag?version=3")
	expectFields(t, "deletion", st.Next(t, 10*time.Second).Data, map[string]any{"deleted": true, "version": -1, "key": "flag", "value": nil})
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/kv/flag")
}

// Lists of keys page by name and show version and size.
func TestKeyList(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)
	a.MustPut(t, "/v1/kv/list-b", []byte("12345"), "text/plain")
	a.MustPut(t, "/v1/kv/list-a", []byte("1"), "text/plain")
	a.MustPut(t, "/v1/kv/other", []byte("1"), "text/plain")
	l := b.Must(t, 200, http.MethodGet, "/v1/kv?prefix=list-&limit=1")
	keys, _ := l.Body["kv"].([]any)
	if len(keys) != 1 || sidecartest.Str(l.Body["next"]) != "list-a" {
		t.Fatalf("first page: %s", l.Raw)
	}
	l = b.Must(t, 200, http.MethodGet, "/v1/kv?prefix=list-&after=list-a")
	if keys, _ = l.Body["kv"].([]any); len(keys) != 1 || l.Body["next"] != nil {
		t.Fatalf("second page: %s", l.Raw)
	}
	if k, _ := keys[0].(map[string]any); sidecartest.Str(k["key"]) != "list-b" || sidecartest.Num(k["size"]) != 5 || sidecartest.Num(k["version"]) != 0 {
		t.Fatalf("item: %s", l.Raw)
	}
}

// A key written with a lease is in the lease's holds and vanishes, for every
// sidecar, when the lease is revoked.
func TestLeasedKeyVanishesWithItsLease(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)
	ctx := context.Background()
	lease := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30s").Body["lease"])
	if r, err := a.PutKey(ctx, "/v1/kv/worker-7?lease="+lease, []byte("10.0.0.7:8080"), "text/plain"); err != nil || r.Status != 200 {
		t.Fatalf("leased put: %v %+v", err, r)
	}
	holds, _ := a.Must(t, 200, http.MethodGet, "/v1/leases/"+lease).Body["holds"].([]any)
	if len(holds) != 1 || fmt.Sprint(holds[0]) != "map[kind:kv name:worker-7]" {
		t.Fatalf("holds %v", holds)
	}
	if r := b.Must(t, 200, http.MethodGet, "/v1/kv/worker-7"); string(r.Raw) != "10.0.0.7:8080" {
		t.Fatalf("read on b: %+v", r)
	}
	// Another client cannot take the name over while it is held.
	other := sidecartest.Str(b.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30s").Body["lease"])
	if r, err := b.PutKey(ctx, "/v1/kv/worker-7?lease="+other, []byte("x"), "text/plain"); err != nil || r.Status != 409 || sidecartest.Num(r.Body["version"]) != 0 {
		t.Fatalf("another lease: %v %+v", err, r)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/kv/worker-7")
	b.Must(t, http.StatusNotFound, http.MethodGet, "/v1/kv/worker-7")
}
