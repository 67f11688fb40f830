package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// A sidecar killed with SIGKILL and started again on the same --state-dir keeps
// a lease's group member, leased key, raised barrier and double-barrier
// participant, checked after the old process's session timeout: the lease
// lists them; another sidecar following the group, the key and /v1/events sees
// no change (the member stays with its value and version, the key keeps its
// value and version, the barrier stays raised, the double barrier keeps its one
// participant), and its barrier waiter is not let through. The requests that
// were waiting on the killed sidecar (a barrier wait, the participant's enter)
// leave nothing behind: the participant is its lease's, whose enter goes on
// waiting. Through the successor the key is written in place, the double
// barrier passes, the member leaves, and the revoked lease lowers the barrier
// and deletes the key. On a 3-node ensemble.
func TestRestartKeepsMembersKeysAndBarriers(t *testing.T) {
	r, a, b, lease := restartOnEnsemble(t)

	a.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/crew/members?id=m1&lease="+lease, `{"value":"10.0.0.1:80"}`)
	a.MustPut(t, "/v1/kv/conf?lease="+lease, []byte("first"), "text/plain")
	if v := a.MustPut(t, "/v1/kv/conf?lease="+lease, []byte("second"), "text/plain").Body["version"]; sidecartest.Num(v) != 1 {
		t.Fatalf("the leased key's second write: version %v, want 1", v)
	}
	a.Must(t, http.StatusNoContent, http.MethodPut, "/v1/barriers/gate?lease="+lease)
	a.Must(t, http.StatusConflict, http.MethodPost, "/v1/double-barriers/meet/participants?id=p1&count=2&wait=0s&lease="+lease)
	// Read through a, whose session made the changes: b's server may not have
	// applied them yet (ZooKeeper orders one session's reads after its writes,
	// not another session's).
	groupVersion := sidecartest.Num(a.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/crew").Body["version"])

	// Waiting on the sidecar about to be killed: its barrier wait and the
	// participant's enter; and on the other sidecar, a barrier wait.
	go func() { _, _ = a.FaultCall(time.Minute, http.MethodPost, "/v1/barriers/gate/wait?wait=50s") }()
	go func() {
		_, _ = a.FaultCall(time.Minute, http.MethodPost, "/v1/double-barriers/meet/participants?id=p1&count=2&wait=50s&lease="+lease)
	}()
	passed := callAsync(b, 2*time.Minute, http.MethodPost, "/v1/barriers/gate/wait?wait=100s")
	seen := followFourKinds(t, b)
	testutil.Eventually(t, 10*time.Second, "the lease and its holds saved", func() bool {
		st := r.savedState(t)
		for _, kind := range []string{"group", "kv", "barrier", "double-barrier"} {
			if !strings.Contains(st, `"kind":"`+kind+`"`) {
				return false
			}
		}
		return strings.Contains(st, lease)
	})

	a, _ = r.restartPastTimeout(t)

	detail := a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
	for _, h := range []string{`"kind":"group","name":"crew/m1"`, `"kind":"kv","name":"conf"`,
		`"kind":"barrier","name":"gate"`, `"kind":"double-barrier","name":"meet/p1"`} {
		if !strings.Contains(string(detail.Raw), h) {
			t.Fatalf("the resumed lease %s: %s; want it holding %s", lease, detail.Raw, h)
		}
	}
	seen.checkUnchanged(t, b, groupVersion)
	select {
	case resp := <-passed:
		t.Fatalf("the other sidecar's barrier waiter answered while the barrier was raised: %d %s", resp.Status, resp.Raw)
	default:
	}

	// Through the successor: the key is the lease's (written in place), the
	// participant's enter goes on and passes once a second one enters, the
	// member leaves, and the revoked lease lowers the barrier and deletes the key.
	if r, err := a.PutKey(context.Background(), "/v1/kv/conf?lease="+lease, []byte("third"), "text/plain"); err != nil || r.Status != http.StatusOK || sidecartest.Num(r.Body["version"]) != 2 {
		t.Fatalf("the leased key written through the successor: %v %+v; want version 2", err, r)
	}
	seen.key.AwaitEvent(t, 10*time.Second, "the key written in place", func(ev sidecartest.TimedEvent) bool {
		return sidecartest.Str(ev.Data["value"]) == "third" && sidecartest.Num(ev.Data["version"]) == 2
	})
	other := callAsync(b, time.Minute, http.MethodPost, "/v1/double-barriers/meet/participants?id=p2&count=2&wait=30s")
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/double-barriers/meet/participants?id=p1&count=2&wait=30s&lease="+lease)
	if resp := <-other; resp.Status != http.StatusCreated {
		t.Fatalf("the second participant's enter: %d %s; want 201", resp.Status, resp.Raw)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/groups/crew/members/m1?lease="+lease)
	seen.members.AwaitEvent(t, 10*time.Second, "the member gone", func(ev sidecartest.TimedEvent) bool { return sidecartest.GroupSummary(ev.Data) == "" })

	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	if resp := <-passed; resp.Status != http.StatusOK {
		t.Fatalf("after the lease ended the barrier waiter got %d %s; want 200 (lowered)", resp.Status, resp.Raw)
	}
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/kv/conf") // through the session that ended the lease
	if dbl := a.Must(t, http.StatusOK, http.MethodGet, "/v1/double-barriers/meet").Body; fmt.Sprint(dbl["participants"]) != "[p2]" {
		t.Fatalf("after the lease ended the double barrier is %v; want p2 alone", dbl)
	}
}

// callAsync sends a request with faultCall in the background; its answer
// (status -1 and the error for none) comes on the channel.
func callAsync(car *sidecartest.Sidecar, timeout time.Duration, method, path string) <-chan *sidecartest.Response {
	ch := make(chan *sidecartest.Response, 1)
	go func() {
		resp, err := car.FaultCall(timeout, method, path)
		if err != nil {
			resp = &sidecartest.Response{Status: -1, Raw: []byte(err.Error())}
		}
		ch <- resp
	}()
	return ch
}

// fourKinds are another sidecar's streams of the test's group "crew", key
// "conf", and of everything (barrier "gate", double barrier "meet").
type fourKinds struct {
	members, key, everything *sidecartest.EventLog
}

// followFourKinds opens the streams on car and waits for each thing's first
// state: member m1, the key's second value, the barrier raised, participant p1.
func followFourKinds(t *testing.T, car *sidecartest.Sidecar) *fourKinds {
	t.Helper()
	f := &fourKinds{
		members:    sidecartest.FollowEvents(t, car, "/v1/groups/crew/events"),
		key:        sidecartest.FollowEvents(t, car, "/v1/kv/conf/events"),
		everything: sidecartest.FollowEvents(t, car, "/v1/events"),
	}
	f.members.AwaitEvent(t, 10*time.Second, "the member", func(ev sidecartest.TimedEvent) bool { return sidecartest.GroupSummary(ev.Data) == "m1=10.0.0.1:80" })
	f.key.AwaitEvent(t, 10*time.Second, "the key", func(ev sidecartest.TimedEvent) bool { return sidecartest.Str(ev.Data["value"]) == "second" })
	// /v1/events orders events per thing, not across things: the two may come
	// either way round (awaitEvent consumes what it passes over).
	var raised, entered bool
	f.everything.AwaitEvent(t, 10*time.Second, "the raised barrier and the participant", func(ev sidecartest.TimedEvent) bool {
		raised = raised || ev.Name == "barrier" && ev.Data["name"] == "gate" && ev.Data["raised"] == true
		entered = entered || ev.Name == "double-barrier" && ev.Data["name"] == "meet" && fmt.Sprint(ev.Data["participants"]) == "[p1]"
		return raised && entered
	})
	return f
}

// checkUnchanged fails t unless car reads the four things as they were before
// the restart and no event of f showed anything else.
func (f *fourKinds) checkUnchanged(t *testing.T, car *sidecartest.Sidecar, groupVersion int64) {
	t.Helper()
	g := car.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/crew").Body
	if sidecartest.GroupSummary(g) != "m1=10.0.0.1:80" || sidecartest.Num(g["version"]) != groupVersion {
		t.Fatalf("after the restart the other sidecar sees group %v; want member m1 at version %d", g, groupVersion)
	}
	if k := car.Must(t, http.StatusOK, http.MethodGet, "/v1/kv/conf"); string(k.Raw) != "second" || k.Header.Get("Version") != "1" {
		t.Fatalf("after the restart the other sidecar reads the key as %q version %q; want \"second\" version 1", k.Raw, k.Header.Get("Version"))
	}
	if br := car.Must(t, http.StatusOK, http.MethodGet, "/v1/barriers/gate").Body; br["raised"] != true {
		t.Fatalf("after the restart the barrier is %v; want it raised", br)
	}
	dbl := car.Must(t, http.StatusOK, http.MethodGet, "/v1/double-barriers/meet").Body
	if fmt.Sprint(dbl["participants"]) != "[p1]" || sidecartest.Num(dbl["count"]) != 2 || dbl["ready"] != false {
		t.Fatalf("after the restart the double barrier is %v; want participant p1 alone, count 2, not ready", dbl)
	}
	for _, ev := range f.members.Events() {
		if sidecartest.GroupSummary(ev.Data) != "m1=10.0.0.1:80" {
			t.Fatalf("the other sidecar's group stream showed a change: %s %v", ev.Name, ev.Data)
		}
	}
	for _, ev := range f.key.Events() {
		if sidecartest.Str(ev.Data["value"]) != "second" || sidecartest.Num(ev.Data["version"]) != 1 {
			t.Fatalf("the other sidecar's key stream showed a change: %s %v", ev.Name, ev.Data)
		}
	}
	for _, ev := range f.everything.Events() {
		if changedThing(ev) {
			t.Fatalf("the other sidecar's /v1/events showed a change: %s %v", ev.Name, ev.Data)
		}
	}
}

// changedThing reports whether ev of /v1/events shows one of the four things
// other than as it was before the restart.
func changedThing(ev sidecartest.TimedEvent) bool {
	switch ev.Name {
	case "barrier":
		return ev.Data["name"] == "gate" && ev.Data["raised"] != true
	case "double-barrier":
		return ev.Data["name"] == "meet" && fmt.Sprint(ev.Data["participants"]) != "[p1]"
	case "group":
		return ev.Data["group"] == "crew" && sidecartest.GroupSummary(ev.Data) != "m1=10.0.0.1:80"
	case "kv":
		return ev.Data["key"] == "conf" && sidecartest.Num(ev.Data["version"]) != 1
	}
	return false
}
