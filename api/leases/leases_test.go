package leases_test

import (
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// TestMain runs the package's tests against the ZooKeeper servers they start.
func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// A lease's life over HTTP: granted with its ttl, read with what it holds,
// kept alive (its expiry moves), revoked (what it held is free before the
// answer, and the lease is gone); every operation on an unknown lease is
// 404 lease-not-found, and a bad ttl is 400 with nothing granted.
func TestLeaseLifecycle(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	other := sidecartest.Start(t, zkc.Servers(), root)

	r := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30s")
	id := sidecartest.Str(r.Body["lease"])
	if id == "" || sidecartest.Str(r.Body["ttl"]) != "30s" {
		t.Fatalf("grant: %s", r.Raw)
	}
	firstExpiry, err := time.Parse(time.RFC3339Nano, sidecartest.Str(r.Body["expiresAt"]))
	if err != nil {
		t.Fatalf("grant's expiresAt: %v", err)
	}

	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/held-by-lease?lease="+id)
	got := car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+id)
	holds, _ := got.Body["holds"].([]any)
	if len(holds) != 1 {
		t.Fatalf("the lease's holds: %s, want the lock", got.Raw)
	}

	testutil.Eventually(t, 10*time.Second, "a keepalive moving the expiry", func() bool {
		kept := car.Must(t, http.StatusOK, http.MethodPost, "/v1/leases/"+id+"/keepalive")
		at, err := time.Parse(time.RFC3339Nano, sidecartest.Str(kept.Body["expiresAt"]))
		return err == nil && at.After(firstExpiry)
	})

	// The lock is held until the revoke's answer, free right after it, on
	// another sidecar too.
	other.Must(t, http.StatusConflict, http.MethodPost, "/v1/locks/held-by-lease")
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+id)
	r = other.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/held-by-lease?wait=10s")
	other.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/held-by-lease?lease="+sidecartest.Str(r.Body["lease"]))

	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/leases/" + id},
		{http.MethodPost, "/v1/leases/" + id + "/keepalive"},
		{http.MethodDelete, "/v1/leases/" + id},
	} {
		r := car.Must(t, http.StatusNotFound, c.method, c.path)
		sidecartest.ProblemIs(t, r, http.StatusNotFound, "lease-not-found")
	}

	before := car.M.LeaseCount()
	for _, ttl := range []string{"0s", "-1s", "soon", "100000h"} {
		r := car.Must(t, http.StatusBadRequest, http.MethodPost, "/v1/leases?ttl="+ttl)
		if sidecartest.ProblemType(r) != "invalid-parameter" {
			t.Fatalf("ttl=%s: %s, want invalid-parameter", ttl, r.Raw)
		}
	}
	if n := car.M.LeaseCount(); n != before {
		t.Fatalf("refused grants left %d leases, want %d", n, before)
	}
}

// The keepalive stream holds its lease while it is open: it starts with the
// lease, ends with `revoked` when the lease is revoked, and a lease whose
// stream the client closes is revoked (what it held is freed).
func TestLeaseStream(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))

	id := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=10s").Body["lease"])
	st := car.OpenStream(t, "/v1/leases/"+id+"/events")
	if ev := st.Next(t, 10*time.Second); ev.Name != "lease" || sidecartest.Str(ev.Data["lease"]) != id {
		t.Fatalf("first event %+v, want the lease", ev)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+id)
	for {
		ev := st.Next(t, 10*time.Second)
		if ev.Name == "revoked" {
			break
		}
		if ev.Name != "lease" {
			t.Fatalf("event %+v before the end, want revoked", ev)
		}
	}

	id = sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/streamed?lease="+id)
	st = car.OpenStream(t, "/v1/leases/"+id+"/events")
	st.Next(t, 10*time.Second)
	st.Cancel()
	<-st.Done
	r := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/streamed?wait=30s")
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/streamed?lease="+sidecartest.Str(r.Body["lease"]))
	car.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+id)
}

// GET /v1/leases lists the caller's token's leases only, in id order, with
// what each holds, paged by limit= and after=; a revoked lease leaves the
// list.
func TestLeaseList(t *testing.T) {
	zkc := zktest.Shared(t)
	dir := t.TempDir()
	sidecartest.WriteFile(t, dir, "tokens.json", []byte(`{"tokens":[
 {"name":"a","token":"token-a-0123456789","allow":["*"]},
 {"name":"b","token":"token-b-0123456789","allow":["*"]}]}`))
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--tokens-file", dir+"/tokens.json")
	a, b := car.As(sidecartest.Bearer("token-a-0123456789")...), car.As(sidecartest.Bearer("token-b-0123456789")...)
	var mine []string
	for range 3 {
		mine = append(mine, sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"]))
	}
	slices.Sort(mine)
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/listed?lease="+mine[1])
	theirs := sidecartest.Str(b.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])

	ids := func(r *sidecartest.Response) (out []string) {
		list, _ := r.Body["leases"].([]any)
		for _, l := range list {
			out = append(out, sidecartest.Str(l.(map[string]any)["lease"]))
		}
		return out
	}
	all := a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases")
	if got := ids(all); !slices.Equal(got, mine) || all.Body["next"] != nil {
		t.Fatalf("token a lists %v (next %v), want %v", got, all.Body["next"], mine)
	}
	holds, _ := all.Body["leases"].([]any)[1].(map[string]any)["holds"].([]any)
	if len(holds) != 1 || holds[0].(map[string]any)["name"] != "listed" {
		t.Fatalf("the lease's holds: %v", holds)
	}
	if got := ids(b.Must(t, http.StatusOK, http.MethodGet, "/v1/leases")); !slices.Equal(got, []string{theirs}) {
		t.Fatalf("token b lists %v, want only its own %s", got, theirs)
	}
	page := a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases?limit=2")
	if got := ids(page); !slices.Equal(got, mine[:2]) || page.Body["next"] != mine[1] {
		t.Fatalf("first page %v next %v", got, page.Body["next"])
	}
	if got := ids(a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases?limit=2&after="+mine[1])); !slices.Equal(got, mine[2:]) {
		t.Fatalf("second page %v", got)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+mine[0])
	if got := ids(a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases")); !slices.Equal(got, mine[1:]) {
		t.Fatalf("after a revoke: %v", got)
	}
	sidecartest.ProblemIs(t, a.Must(t, http.StatusBadRequest, http.MethodGet, "/v1/leases?limit=0"), http.StatusBadRequest, "invalid-parameter")
}
