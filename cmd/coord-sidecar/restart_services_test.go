package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// A sidecar killed with SIGKILL and started again on the same --state-dir keeps
// a lease's service instance, checked after the old process's session timeout:
// the lease lists it, another sidecar sees the same instance at the same
// version (no removal, no registration; its stream shows nothing new), the
// successor updates it in place with its registration time kept, and the
// revoked lease removes it. On a 3-node ensemble.
func TestRestartKeepsServiceInstances(t *testing.T) {
	r, a, b, lease := restartOnEnsemble(t)

	reg := a.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/web/instances/i1?lease="+lease, `{"address":"10.0.0.1","port":80}`)
	before := a.Must(t, http.StatusOK, http.MethodGet, "/v1/services/web") // a's session made the change: read through it
	version := sidecartest.Num(before.Body["version"])
	st := b.OpenStream(t, "/v1/services/web/events")
	testutil.Eventually(t, 10*time.Second, "b's stream at the registration", func() bool {
		ev := st.Next(t, 10*time.Second)
		return sidecartest.Num(ev.Data["version"]) == version
	})
	testutil.Eventually(t, 10*time.Second, "the lease and its instance saved", func() bool {
		s := r.savedState(t)
		return strings.Contains(s, `"kind":"service"`) && strings.Contains(s, lease)
	})

	a, _ = r.restartPastTimeout(t)

	detail := a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
	if !strings.Contains(string(detail.Raw), `"kind":"service","name":"web/i1"`) {
		t.Fatalf("the resumed lease %s: %s; want it holding web/i1", lease, detail.Raw)
	}
	if got := b.Must(t, http.StatusOK, http.MethodGet, "/v1/services/web"); string(got.Raw) != string(before.Raw) {
		t.Fatalf("another sidecar sees %s after the restart; before: %s", got.Raw, before.Raw)
	}
	select {
	case ev := <-st.Events:
		t.Fatalf("another sidecar's stream showed a change through the restart: %+v", ev)
	default:
	}

	up := a.Send(t, http.StatusOK, http.MethodPut, "/v1/services/web/instances/i1?lease="+lease, `{"address":"10.0.0.2","port":80}`)
	if up.Body["registeredAt"] != reg.Body["registeredAt"] || up.Body["address"] != "10.0.0.2" {
		t.Fatalf("the update through the successor: %s (registered %s)", up.Raw, reg.Raw)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	testutil.Eventually(t, 10*time.Second, "the revoked lease's instance gone", func() bool {
		list, _ := b.Must(t, http.StatusOK, http.MethodGet, "/v1/services/web").Body["instances"].([]any)
		return len(list) == 0
	})
}
