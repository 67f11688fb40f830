package main

import (
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Suspension is not loss (issue 36). The tests here cut a sidecar's
// connections to ZooKeeper with a fault proxy, which makes a suspension of
// exactly the length wanted without touching the servers. A 12 s session
// timeout puts the point where the session could have expired (2/3 of it
// after ZooKeeper last answered) well past a 3 s cut and the reconnect after
// it (go-zookeeper retries a refused server once a second).
const suspendTimeout = "12s"

// cutFor cuts proxy, waits until the sidecar's session stream says
// `suspended`, keeps the cut for d from the cut in all, then restores it and
// waits for `reconnected`.
func cutFor(t *testing.T, proxy *faultproxy.Proxy, sess *sidecartest.EventLog, d time.Duration) time.Time {
	t.Helper()
	at := time.Now()
	proxy.Cut()
	sess.AwaitEvent(t, 10*time.Second, "suspended", sessionEvent("suspended"))
	time.Sleep(d - time.Since(at))
	proxy.Restore()
	sess.AwaitEvent(t, 20*time.Second, "reconnected", sessionEvent("reconnected"))
	return at
}

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
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", suspendTimeout)
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=5m").Body["lease"])
	c1 := sidecartest.Campaign(t, car, "kept", "c1", "lease="+lease)
	if c1.Body["leader"] != true {
		t.Fatalf("c1 does not lead: %s", c1.Raw)
	}
	term := sidecartest.Num(c1.Body["term"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/groups/kept/members?id=m1&lease="+lease)
	token := sidecartest.Num(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/kept?owner=me&lease="+lease).Body["fencingToken"])

	sess := sidecartest.FollowEvents(t, car, "/v1/session/events")
	sess.AwaitEvent(t, 5*time.Second, "connected", sessionEvent("connected"))
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
	cutAt := cutFor(t, proxy, sess, 3*time.Second)
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

// The elect wrapper keeps its leader's command running through a 3 s
// suspension (never stopped nor started again), and stops it when a
// suspension lasts until the session could have expired: the sidecar reports
// the candidacy lost then (`lost-hold`), before ZooKeeper can expire the
// session, and the wrapper exits 76. Never before: not at the suspension's
// start.
func TestElectWrapperThroughSuspension(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", suspendTimeout)
	sess := sidecartest.FollowEvents(t, car, "/v1/session/events")
	sess.AwaitEvent(t, 5*time.Second, "connected", sessionEvent("connected"))
	log := filepath.Join(t.TempDir(), "runs.log")
	cmd := wrapper(bin, car.M.Addr(), append([]string{"elect", "job", "--id", "w1", "--grace", "5s", "--"}, recorder(log, "w1", "sleep 600")...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	testutil.Eventually(t, 20*time.Second, "the leader's command starts", func() bool { return len(spans(t, log)) == 1 })
	elections := sidecartest.FollowEvents(t, car, "/v1/elections/job/events")
	elections.AwaitEvent(t, 5*time.Second, "w1 sidecartest.Leads", sidecartest.Leads("w1"))

	// A 3 s suspension: the command runs on.
	cutFor(t, proxy, sess, 3*time.Second)
	elections.AwaitEvent(t, 20*time.Second, "the election read again", func(ev sidecartest.TimedEvent) bool {
		_, c, ok := sidecartest.EventLeader(ev.Event)
		return ok && c == "w1" && ev.Data["suspended"] == nil
	})
	time.Sleep(time.Second) // room for a wrong stop to show
	if ss := spans(t, log); len(ss) != 1 || ss[0].end >= 0 {
		t.Fatalf("the command after a 3 s suspension: %+v, want the first run still running", ss)
	}
	select {
	case err := <-done:
		t.Fatalf("the wrapper exited through a 3 s suspension: %v", err)
	default:
	}

	// A suspension that lasts: the command is stopped once the session could
	// have expired, and the wrapper exits 76.
	cutAt := time.Now()
	proxy.Cut()
	defer proxy.Restore()
	sess.AwaitEvent(t, 10*time.Second, "suspended again", sessionEvent("suspended"))
	testutil.Eventually(t, 60*time.Second, "the command stopped", func() bool {
		ss := spans(t, log)
		return len(ss) == 1 && ss[0].end >= 0
	})
	stoppedAfter := time.Unix(0, spans(t, log)[0].end).Sub(cutAt)
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ctl.ExitLeaseLost {
			t.Fatalf("wrapper: %v, want exit %d", err, ctl.ExitLeaseLost)
		}
	case <-time.After(testutil.Patience(20 * time.Second)):
		t.Fatal("the wrapper did not exit")
	}
	neverLost(t, sess, "before the command stopped: it must stop while the session is suspended")
	// The stop waits for the doubt, 2/3 of the timeout (8 s) after ZooKeeper
	// last answered, which was at most a heartbeat (1.2 s) before the cut: a
	// stop within 4 s of the cut would be a stop at the suspension itself.
	if stoppedAfter < 4*time.Second {
		t.Fatalf("the command stopped %s after the cut: before the session could have expired", stoppedAfter)
	}
	t.Logf("the command ran through a 3 s suspension, and was stopped %s after the start of a long one (session timeout %s)",
		stoppedAfter.Round(time.Millisecond), suspendTimeout)
}
