package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Suspension is not loss (issue 36), for the wrappers: a sidecar's
// connections to ZooKeeper cut with a fault proxy (sidecartest.CutFor). The
// same for the streams a client follows is api/suspend_test.go's.

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
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", sidecartest.SuspendTimeout)
	sess := sidecartest.FollowEvents(t, car, "/v1/session/events")
	sess.AwaitEvent(t, 5*time.Second, "connected", sidecartest.SessionEvent("connected"))
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
	elections.AwaitEvent(t, 5*time.Second, "w1 leads", sidecartest.Leads("w1"))

	// A 3 s suspension: the command runs on.
	sidecartest.CutFor(t, proxy, sess, 3*time.Second)
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
	sess.AwaitEvent(t, 10*time.Second, "suspended again", sidecartest.SessionEvent("suspended"))
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
	sidecartest.NeverLost(t, sess, "before the command stopped: it must stop while the session is suspended")
	// The stop waits for the doubt, 2/3 of the timeout (8 s) after ZooKeeper
	// last answered, which was at most a heartbeat (1.2 s) before the cut: a
	// stop within 4 s of the cut would be a stop at the suspension itself.
	if stoppedAfter < 4*time.Second {
		t.Fatalf("the command stopped %s after the cut: before the session could have expired", stoppedAfter)
	}
	t.Logf("the command ran through a 3 s suspension, and was stopped %s after the start of a long one (session timeout %s)",
		stoppedAfter.Round(time.Millisecond), sidecartest.SuspendTimeout)
}
