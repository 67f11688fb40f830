package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Suspension is not loss (issue 36): a sidecar's connections to ZooKeeper
// cut with a fault proxy for a few seconds (sidecartest.CutFor, with
// sidecartest.SuspendTimeout as the session timeout).

// suspendedSince checks that ev's data is marked suspended since about cutAt
// (an RFC 3339 instant no sooner than a second before it) and returns it.
func suspendedSince(t *testing.T, what string, ev sidecartest.TimedEvent, cutAt time.Time) time.Time {
	t.Helper()
	if ev.Data["suspended"] != true {
		t.Fatalf("%s: %v, want suspended", what, ev.Data)
	}
	since, err := time.Parse(time.RFC3339Nano, sidecartest.Str(ev.Data["suspendedSince"]))
	if err != nil || since.Before(cutAt.Add(-time.Second)) || since.After(time.Now()) {
		t.Fatalf("%s: suspendedSince %q (%v), want the cut's instant %s", what, ev.Data["suspendedSince"], err, cutAt.Format(time.RFC3339Nano))
	}
	return since
}

// notSuspended checks that ev's data carries neither suspension field.
func notSuspended(t *testing.T, what string, ev sidecartest.TimedEvent) {
	t.Helper()
	if _, ok := ev.Data["suspended"]; ok {
		t.Fatalf("%s: %v, want no suspended field", what, ev.Data)
	}
	if _, ok := ev.Data["suspendedSince"]; ok {
		t.Fatalf("%s: %v, want no suspendedSince field", what, ev.Data)
	}
}

// A 3 s suspension changes nothing anyone follows: the election keeps its
// leader (same candidate, same term), the group its members and the lock its
// holder (same token). Each stream sends exactly one event at the start of the
// suspension (the last known state, marked suspended since the cut) and one
// at its end (the state read again), nothing else; the lease loses nothing.
func TestSuspensionKeepsFollowedState(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", sidecartest.SuspendTimeout)
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=5m").Body["lease"])
	c1 := sidecartest.Campaign(t, car, "kept", "c1", "lease="+lease)
	if c1.Body["leader"] != true {
		t.Fatalf("c1 does not lead: %s", c1.Raw)
	}
	term := sidecartest.Num(c1.Body["term"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/groups/kept/members?id=m1&lease="+lease)
	token := sidecartest.Num(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/kept?owner=me&lease="+lease).Body["fencingToken"])

	sess := sidecartest.FollowEvents(t, car, "/v1/session/events")
	sess.AwaitEvent(t, 5*time.Second, "connected", sidecartest.SessionEvent("connected"))
	leases := sidecartest.FollowEvents(t, car, "/v1/leases/"+lease+"/events")
	leases.AwaitEvent(t, 5*time.Second, "lease", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lease" })
	type followed struct {
		name  string
		log   *sidecartest.EventLog
		check func(what string, ev sidecartest.TimedEvent) // the state is the one before the cut
	}
	streams := []followed{
		{"election", sidecartest.FollowEvents(t, car, "/v1/elections/kept/events"), func(what string, ev sidecartest.TimedEvent) {
			if tm, c, ok := sidecartest.EventLeader(ev.Event); !ok || c != "c1" || tm != term {
				t.Fatalf("%s: %v, want c1 leading in term %d", what, ev.Data, term)
			}
		}},
		{"group", sidecartest.FollowEvents(t, car, "/v1/groups/kept/events"), func(what string, ev sidecartest.TimedEvent) {
			ms, _ := ev.Data["members"].([]any)
			if len(ms) != 1 || sidecartest.Str(ms[0].(map[string]any)["id"]) != "m1" {
				t.Fatalf("%s: %v, want the member m1", what, ev.Data)
			}
		}},
		{"lock", sidecartest.FollowEvents(t, car, "/v1/locks/kept/events"), func(what string, ev sidecartest.TimedEvent) {
			h, _ := ev.Data["holder"].(map[string]any)
			if sidecartest.Num(h["fencingToken"]) != token {
				t.Fatalf("%s: %v, want the holder of token %d", what, ev.Data, token)
			}
		}},
	}
	for _, s := range streams {
		first := s.log.AwaitEvent(t, 5*time.Second, s.name+"'s first state", func(sidecartest.TimedEvent) bool { return true })
		s.check(s.name+"'s first state", first)
		notSuspended(t, s.name+"'s first state", first)
	}

	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	cutAt := sidecartest.CutFor(t, proxy, sess, 3*time.Second)
	for _, s := range streams {
		susp := s.log.AwaitEvent(t, 10*time.Second, s.name+" suspended", func(sidecartest.TimedEvent) bool { return true })
		s.check(s.name+" while suspended", susp)
		suspendedSince(t, s.name+" while suspended", susp, cutAt)
		sidecartest.CheckEvent(t, spec, s.log.Path, susp.Event) // the suspended state matches openapi.yaml
		back := s.log.AwaitEvent(t, 20*time.Second, s.name+" back", func(sidecartest.TimedEvent) bool { return true })
		s.check(s.name+" after the suspension", back)
		notSuspended(t, s.name+" after the suspension", back)
	}
	time.Sleep(time.Second) // room for a stray event to show
	for _, s := range streams {
		if extra := s.log.Pending(); len(extra) != 0 {
			t.Fatalf("%s stream: events after the suspension's end: %+v", s.name, extra)
		}
	}
	for _, ev := range leases.Pending() {
		if ev.Name != "lease" {
			t.Fatalf("lease stream through a short suspension: %s %v", ev.Name, ev.Data)
		}
	}
	if holds := car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease).Body["holds"].([]any); len(holds) != 3 {
		t.Fatalf("the lease holds %v after the suspension", holds)
	}
	t.Logf("session events: %v", sess.Names())
}
