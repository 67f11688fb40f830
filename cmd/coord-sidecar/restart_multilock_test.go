package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// A sidecar killed with SIGKILL and started again on the same --state-dir
// keeps a lease's multi-lock, checked after the old process's session
// timeout: the lease lists its three locks, another sidecar sees each held by
// the same owner with the same fencing token, another lease's multi-lock of
// one of them is refused, and the successor releases all three together. On
// a 3-node ensemble.
func TestRestartKeepsMultiLocks(t *testing.T) {
	r, a, b, lease := restartOnEnsemble(t)

	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/multilocks?names=r-c,r-a,r-b&owner=A&lease="+lease)
	names := []string{"r-a", "r-b", "r-c"}
	tokens := map[string]int64{}
	for _, n := range names {
		h, _ := b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+n).Body["holder"].(map[string]any)
		if h == nil || h["owner"] != "A" {
			t.Fatalf("before the restart %s's holder is %v, want A", n, h)
		}
		tokens[n] = sidecartest.Num(h["fencingToken"])
	}
	testutil.Eventually(t, 10*time.Second, "the lease and its locks saved", func() bool {
		s := r.savedState(t)
		return strings.Contains(s, lease) && strings.Contains(s, `"name":"r-c"`)
	})

	a, _ = r.restartPastTimeout(t)

	holds, _ := a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease).Body["holds"].([]any)
	if len(holds) != 3 {
		t.Fatalf("the resumed lease lists %d holds, want the 3 locks: %v", len(holds), holds)
	}
	for _, n := range names {
		h, _ := b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+n).Body["holder"].(map[string]any)
		if h == nil || h["owner"] != "A" || sidecartest.Num(h["fencingToken"]) != tokens[n] {
			t.Fatalf("after the restart another sidecar sees %s held by %v, want A with token %v", n, h, tokens[n])
		}
	}
	other := sidecartest.Str(b.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	b.Must(t, http.StatusConflict, http.MethodPost, "/v1/multilocks?names=x-r,r-b&owner=B&lease="+other)

	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/multilocks?names=r-a,r-b,r-c&lease="+lease)
	for _, n := range names {
		if h := b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+n).Body["holder"]; h != nil {
			t.Fatalf("after the successor's release %s is held by %v", n, h)
		}
	}
}
