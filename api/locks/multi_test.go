package locks_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// holderOf is the owner holding lock name on car ("" when free).
func holderOf(t *testing.T, car *sidecartest.Sidecar, name string) string {
	t.Helper()
	h, _ := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+name).Body["holder"].(map[string]any)
	return sidecartest.Str(h["owner"])
}

// A multi-lock holds every named lock, listed in name order with the tokens
// the single locks show, each a hold of its own on the lease; when one lock
// is in the way it answers 409 lock-held naming it and its holder, and keeps
// nothing it took, while a lock the lease held before stays held; a release
// of names the lease does not all hold releases nothing.
func TestMultiLockAllOrNone(t *testing.T) {
	t.Parallel()
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	lease := func() string {
		return sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	}

	a := lease()
	r := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/multilocks?names=m-c,m-a,m-b&owner=A&lease="+a)
	locks, _ := r.Body["locks"].([]any)
	if sidecartest.Str(r.Body["lease"]) != a || len(locks) != 3 {
		t.Fatalf("grant %s", r.Raw)
	}
	for i, want := range []string{"m-a", "m-b", "m-c"} {
		l := locks[i].(map[string]any)
		st := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+want).Body["holder"].(map[string]any)
		if sidecartest.Str(l["name"]) != want || sidecartest.Num(l["fencingToken"]) != sidecartest.Num(st["fencingToken"]) || st["owner"] != "A" {
			t.Fatalf("lock %d: %v, the lock shows %v", i, l, st)
		}
	}
	holds, _ := car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+a).Body["holds"].([]any)
	if len(holds) != 3 {
		t.Fatalf("the lease lists %d holds, want 3: %v", len(holds), holds)
	}

	// B holds x-1 before; its multi-lock of x-1, x-2 and m-b stops at m-b.
	b := lease()
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/x-1?owner=B&lease="+b)
	p := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/multilocks?names=x-1,x-2,m-b&owner=B&lease="+b)
	sidecartest.ProblemIs(t, p, http.StatusConflict, "lock-held")
	if h, _ := p.Body["holder"].(map[string]any); p.Body["name"] != "m-b" || h["owner"] != "A" {
		t.Fatalf("409 names %v held by %v; want m-b held by A", p.Body["name"], p.Body["holder"])
	}
	if o := holderOf(t, car, "x-2"); o != "" {
		t.Fatalf("x-2 kept by %q after the failed multi-lock", o)
	}
	if o := holderOf(t, car, "x-1"); o != "B" {
		t.Fatalf("x-1, held by B before, now held by %q", o)
	}

	// A release naming a lock the lease does not hold releases nothing.
	nh := car.Must(t, http.StatusNotFound, http.MethodDelete, "/v1/multilocks?names=m-a,x-1&lease="+a)
	sidecartest.ProblemIs(t, nh, http.StatusNotFound, "not-held")
	if o := holderOf(t, car, "m-a"); o != "A" {
		t.Fatalf("m-a released by a refused release: holder %q", o)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/multilocks?names=m-b,m-a,m-c&lease="+a)
	for _, n := range []string{"m-a", "m-b", "m-c"} {
		if o := holderOf(t, car, n); o != "" {
			t.Fatalf("%s still held by %q after the release", n, o)
		}
	}
	// Now B's multi-lock gets them all.
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/multilocks?names=x-1,x-2,m-b&owner=B&lease="+b)
}

// With ttl= the multi-lock makes an implicit lease that ends with the
// release; a waiting multi-lock is granted once the lock in the way is let go.
func TestMultiLockImplicitLeaseAndWait(t *testing.T) {
	t.Parallel()
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	r := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/multilocks?names=i-a,i-b&ttl=30s")
	lease := sidecartest.Str(r.Body["lease"])
	got := make(chan *sidecartest.Response, 1)
	go func() {
		w, _ := car.Do(context.Background(), http.MethodPost, "/v1/multilocks?names=i-b,i-c&wait=60s&ttl=30s&owner=W", nil)
		got <- w
	}()
	testutil.Eventually(t, 10*time.Second, "the multi-lock waits for i-b", func() bool {
		return sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/i-b").Body["waiters"]) == 1
	})
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/multilocks?names=i-a,i-b&lease="+lease)
	car.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+lease)
	w := <-got
	if w == nil || w.Status != http.StatusCreated || holderOf(t, car, "i-b") != "W" || holderOf(t, car, "i-c") != "W" {
		t.Fatalf("the waiting multi-lock: %v", w)
	}
}

// Clients taking the same two locks named in opposite orders never deadlock
// (names are taken in name order) and never overlap.
func TestMultiLocksInOppositeOrdersDoNotDeadlock(t *testing.T) {
	t.Parallel()
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for c := range 8 {
		wg.Go(func() {
			names := []string{"d-p,d-q", "d-q,d-p"}[c%2]
			car := cars[c%2]
			for range 10 {
				r, err := car.Do(context.Background(), http.MethodPost, "/v1/multilocks?names="+names+"&wait=60s&ttl=30s", nil)
				if err != nil || r.Status != http.StatusCreated {
					errs <- fmt.Errorf("client %d: %v %v", c, err, r)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				inside.Add(-1)
				d, err := car.Do(context.Background(), http.MethodDelete, "/v1/multilocks?names="+names+"&lease="+sidecartest.Str(r.Body["lease"]), nil)
				if err != nil || d.Status != http.StatusNoContent {
					errs <- fmt.Errorf("client %d release: %v %v", c, err, d)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping multi-locks", n)
	}
}

// Mistakes are refused with 400 before anything is made in ZooKeeper, and a
// token that may not take one of the names gets 403 for the whole.
func TestMultiLockRefusesMistakes(t *testing.T) {
	t.Parallel()
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	dir := t.TempDir()
	sidecartest.WriteFile(t, dir, "tokens.json", []byte(`{"tokens":[{"name":"app","token":"tok-app-0123456789ab","allow":["locks/app-*"]}]}`))
	car := sidecartest.Start(t, zkc.Servers(), root, "--tokens-file", dir+"/tokens.json").As(sidecartest.Bearer("tok-app-0123456789ab")...)
	many := make([]string, 33)
	for i := range many {
		many[i] = fmt.Sprintf("app-%d", i)
	}
	for _, c := range []struct{ query, problem string }{
		{"names=", "invalid-parameter"},
		{"names=app-a,,app-b", "invalid-parameter"},
		{"names=app-a,app-b,app-a", "invalid-parameter"},
		{"names=" + strings.Join(many, ","), "invalid-parameter"},
		{"names=app-a,app-b%21", "invalid-name"},
		{"names=app-a&wait=forever", "invalid-parameter"},
	} {
		r := car.Must(t, http.StatusBadRequest, http.MethodPost, "/v1/multilocks?ttl=30s&"+c.query)
		sidecartest.ProblemIs(t, r, http.StatusBadRequest, c.problem)
	}
	sidecartest.ProblemIs(t, car.Must(t, http.StatusForbidden, http.MethodPost, "/v1/multilocks?ttl=30s&names=app-a,other-b"), http.StatusForbidden, "forbidden")
	sidecartest.ProblemIs(t, car.Must(t, http.StatusForbidden, http.MethodDelete, "/v1/multilocks?lease=x&names=other-b"), http.StatusForbidden, "forbidden")
	raw := sidecartest.ZkClient(t, zkc.Servers(), "")
	if ok, _, err := raw.Exists(root + "/locks"); err != nil || ok {
		if names, _, _ := raw.Children(root + "/locks"); len(names) > 0 {
			t.Fatalf("refused multi-locks left %v in ZooKeeper", names)
		}
	}
	if n := sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["leases"]); n != 0 {
		t.Fatalf("refused multi-locks left %d leases", n)
	}
}
