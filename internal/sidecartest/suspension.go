package sidecartest

import (
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
)

// SuspendTimeout is the --session-timeout of the suspension tests (issue 36:
// suspension is not loss), which cut a sidecar's connections to ZooKeeper with
// a fault proxy to make a suspension of exactly the length wanted without
// touching the servers. 12 s puts the point where the session could have
// expired (2/3 of it after ZooKeeper last answered) well past a 3 s cut and
// the reconnect after it (go-zookeeper retries a refused server once a
// second).
const SuspendTimeout = "12s"

// SessionEvent matches a session stream's event for state (connected,
// suspended, reconnected, lost).
func SessionEvent(state string) func(TimedEvent) bool {
	return func(ev TimedEvent) bool {
		return ev.Name == "session" && Str(ev.Data["state"]) == state
	}
}

// CutFor cuts proxy, waits until the sidecar's session stream sess says
// `suspended`, keeps the cut for d from the cut in all, then restores it and
// waits for `reconnected`. It returns the instant of the cut.
func CutFor(t *testing.T, proxy *faultproxy.Proxy, sess *EventLog, d time.Duration) time.Time {
	t.Helper()
	at := time.Now()
	proxy.Cut()
	sess.AwaitEvent(t, 10*time.Second, "suspended", SessionEvent("suspended"))
	time.Sleep(d - time.Since(at))
	proxy.Restore()
	sess.AwaitEvent(t, 20*time.Second, "reconnected", SessionEvent("reconnected"))
	return at
}

// NeverLost fails t if the session stream sess said `lost` (when: why it must
// not have).
func NeverLost(t *testing.T, sess *EventLog, when string) {
	t.Helper()
	for _, ev := range sess.Events() {
		if Str(ev.Data["state"]) == "lost" {
			t.Fatalf("session events %v: lost %s", sess.Names(), when)
		}
	}
}
