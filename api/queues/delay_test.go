package queues_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A delayed item (delay=) is neither taken nor claimed before its due time, is
// counted as delayed (and in the length) until then, and a waiting take on
// another sidecar gets it after; an at= item in the past is taken at once,
// before it.
func TestDelayedItemOverHTTP(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	ctx := context.Background()

	id, dueAt := enqueueLater(t, a)
	g := a.Must(t, http.StatusOK, "GET", "/v1/queues/later")
	if time.Now().Before(dueAt) && (sidecartest.Num(g.Body["delayed"]) != 1 || sidecartest.Num(g.Body["length"]) != 1) {
		t.Fatalf("GET before the due time: %s", g.Raw)
	}
	for _, car := range []*sidecartest.Sidecar{a, b} {
		notBeforeDue(t, ctx, car, dueAt)
	}
	// An item whose at= is past is due at once and comes first.
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	p := a.Send(t, http.StatusCreated, "POST", "/v1/queues/later/items?at="+past, `{"v":"now"}`)
	if pid := sidecartest.Str(p.Body["id"]); !strings.HasPrefix(pid, "p00.") || p.Body["due"] != nil {
		t.Fatalf("at in the past: %s", p.Raw)
	}
	if tk, err := quTake(ctx, b, "later", "0s"); err != nil || tk == nil || string(tk.Raw) != `{"v":"now"}` {
		t.Fatalf("take of the at-in-the-past item: %+v %v", tk, err)
	}
	tk, err := quTake(ctx, b, "later", "30s")
	if err != nil || tk == nil || string(tk.Raw) != `{"v":"late"}` {
		t.Fatalf("waiting take: %+v %v", tk, err)
	}
	if time.Now().Before(dueAt) {
		t.Fatal("taken before its due time")
	}
	if itemID := tk.Header.Get("Item-Id"); !strings.HasPrefix(itemID, "p00.") || !strings.Contains(itemID, "-"+delayedToken(id)+"-") {
		t.Fatalf("taken as %q; delayed id %q", itemID, id)
	}
	g = b.Must(t, http.StatusOK, "GET", "/v1/queues/later")
	if sidecartest.Num(g.Body["delayed"]) != 0 || sidecartest.Num(g.Body["length"]) != 0 {
		t.Fatalf("GET after: %s", g.Raw)
	}
}

// notBeforeDue checks that car neither takes nor claims queue later's item
// before dueAt (skipping the test when the machine is too slow to try before).
func notBeforeDue(t *testing.T, ctx context.Context, car *sidecartest.Sidecar, dueAt time.Time) {
	t.Helper()
	tk, err := quTake(ctx, car, "later", "0s")
	if err != nil {
		t.Fatal(err)
	}
	if tk != nil && time.Now().Before(dueAt) {
		t.Fatalf("taken before its due time: %s", tk.Raw)
	}
	if tk != nil {
		t.Skip("the machine was too slow to take before the due time")
	}
	if c := quClaim(t, car, "later", "?ttl=10s"); c != nil && time.Now().Before(dueAt) {
		t.Fatalf("claimed before its due time: %s", c.Raw)
	} else if c != nil {
		t.Skip("the machine was too slow to claim before the due time")
	}
}

// Delayed items come out in due order whatever their enqueue order, and each
// exactly once with two sidecars taking concurrently.
func TestDelayedItemsInDueOrderAcrossSidecars(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	ctx := context.Background()
	base := time.Now().Add(2 * time.Second).UTC()
	at := func(ms int) string { return base.Add(time.Duration(ms) * time.Millisecond).Format(time.RFC3339Nano) }
	// Enqueued in reverse order of their due times.
	for i, ms := range []int{900, 600, 300, 0} {
		if _, err := quEnqueue(ctx, a, "ordered", "?at="+at(ms), "text/plain", []byte{byte('d' - i)}); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	for _, car := range []*sidecartest.Sidecar{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				tk, err := quTake(ctx, car, "ordered", "5s")
				if err != nil {
					t.Error(err)
					return
				}
				if tk == nil {
					return
				}
				mu.Lock()
				got = append(got, string(tk.Raw)+"@"+tk.Header.Get("Item-Id"))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(got) != 4 {
		t.Fatalf("taken %v, want 4 items once each", got)
	}
	// Whoever took them, the items' places in the queue follow their due order.
	pos := map[string]quPos{}
	for _, g := range got {
		data, id, _ := strings.Cut(g, "@")
		if _, dup := pos[data]; dup {
			t.Fatalf("%s taken twice: %v", data, got)
		}
		pos[data] = quPosOf(t, id)
	}
	for _, pair := range [][2]string{{"a", "b"}, {"b", "c"}, {"c", "d"}} {
		if !pos[pair[0]].before(pos[pair[1]]) {
			t.Fatalf("%s (due first) was placed after %s: %v", pair[0], pair[1], got)
		}
	}
}

// delayedToken is the token a delayed item's id shares with the item it becomes.
func delayedToken(id string) string { return id[strings.Index(id, "-")+1 : strings.LastIndex(id, "-")] }

// enqueueLater enqueues {"v":"late"} to queue later through a, 3 s ahead, and
// returns its delayed id and the due time it was told.
func enqueueLater(t *testing.T, a *sidecartest.Sidecar) (string, time.Time) {
	t.Helper()
	enq := time.Now()
	r := a.Send(t, http.StatusCreated, "POST", "/v1/queues/later/items?delay=3s", `{"v":"late"}`)
	id := sidecartest.Str(r.Body["id"])
	dueAt, err := time.Parse(time.RFC3339Nano, sidecartest.Str(r.Body["due"]))
	if err != nil || !strings.HasPrefix(id, "delayed.") || dueAt.Before(enq.Add(3*time.Second).Truncate(time.Millisecond)) {
		t.Fatalf("delayed enqueue: %s (%v)", r.Raw, err)
	}
	return id, dueAt
}
