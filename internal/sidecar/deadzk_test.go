package sidecar_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A dead or wrong --zk is loud (issue 39, item 2): at the default log level a
// warning names the servers and the error within seconds, and again with
// backoff rather than once per retry; GET /v1/session shows lastError,
// /readyz's 503 says why, and an operation's 503 names the servers tried and
// the last error; coord_zk_connection_failures_total counts the failures.
func TestDeadZooKeeperIsLoud(t *testing.T) {
	dead := deadAddress(t)
	// --suspend-wait 0s: an operation answers at once from the session's
	// state (the path that said only "session connecting").
	car, logs := startLoggedSidecar(t, []string{dead}, "/loud", "--suspend-wait", "0s")

	var warns []logLine
	testutil.Eventually(t, 60*time.Second, "three warnings of the unreachable ZooKeeper at the default level", func() bool {
		warns = unreachableWarnings(logs.String())
		return len(warns) >= 3
	})
	for _, w := range warns {
		if w.Level != "WARN" || !strings.Contains(w.Servers, dead) || !strings.Contains(w.Err, "connection refused") {
			t.Errorf("warning %+v: want level WARN, the server %s and the dial's error", w, dead)
		}
	}
	// Backoff: go-zookeeper retries about once a second; the warnings are
	// fewer than the failures they report.
	if last := warns[len(warns)-1]; last.Failures <= len(warns) {
		t.Errorf("%d warnings for %d failures: one per retry, want fewer (backoff)", len(warns), last.Failures)
	}
	if warns[1].Failures <= warns[0].Failures {
		t.Errorf("second warning reports %d failures, first %d: want more", warns[1].Failures, warns[0].Failures)
	}

	if n := sidecartest.MetricSum(t, car, "coord_zk_connection_failures_total"); n < float64(warns[len(warns)-1].Failures) {
		t.Errorf("coord_zk_connection_failures_total %v, below the %d failures the last warning reported", n, warns[len(warns)-1].Failures)
	}

	sess := car.Must(t, http.StatusOK, http.MethodGet, "/v1/session")
	if le := sidecartest.Str(sess.Body["lastError"]); !strings.Contains(le, dead) || !strings.Contains(le, "connection refused") {
		t.Errorf("GET /v1/session lastError %q: want the server %s and the error; body %s", le, dead, sess.Raw)
	}
	if at := sidecartest.Str(sess.Body["lastErrorAt"]); at == "" {
		t.Errorf("GET /v1/session: no lastErrorAt: %s", sess.Raw)
	}

	ready := car.Must(t, http.StatusServiceUnavailable, http.MethodGet, "/readyz")
	if d := sidecartest.Str(ready.Body["detail"]); !strings.Contains(d, dead) || !strings.Contains(d, "connection refused") {
		t.Errorf("/readyz detail %q: want the server %s and the error", d, dead)
	}

	for _, op := range [][2]string{{http.MethodPost, "/v1/leases"}, {http.MethodGet, "/v1/locks/m"}} {
		r := car.Must(t, http.StatusServiceUnavailable, op[0], op[1])
		sidecartest.ProblemIs(t, r, http.StatusServiceUnavailable, "zookeeper-unavailable")
		if d := sidecartest.Str(r.Body["detail"]); !strings.Contains(d, "servers tried: "+dead) || !strings.Contains(d, "connection refused") {
			t.Errorf("%s %s: %s: want the detail naming the servers tried and the last error", op[0], op[1], r.Raw)
		}
	}
}

// deadAddress is a loopback address nothing listens on, so that connecting is
// refused: port 1 (tcpmux) is served nowhere the tests run and, outside the
// ephemeral range, never handed to a test's listener (a port freed by a
// listener of this test could be, by another package's test running at once).
func deadAddress(t *testing.T) string {
	t.Helper()
	const addr = "127.0.0.1:1"
	if c, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
		c.Close()
		t.Skipf("something listens on %s: the test needs a port where connecting is refused", addr)
	}
	return addr
}

// logLine is the part of a JSON log line the test reads.
type logLine struct {
	Level    string `json:"level"`
	Msg      string `json:"msg"`
	Servers  string `json:"servers"`
	State    string `json:"state"`
	Err      string `json:"lastError"`
	Failures int    `json:"failures"`
}

// unreachableWarnings are the log's lines that tell ZooKeeper is unreachable.
func unreachableWarnings(log string) []logLine {
	var out []logLine
	for _, line := range strings.Split(log, "\n") {
		var l logLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "zookeeper unreachable" {
			out = append(out, l)
		}
	}
	return out
}

// A connection lost while the session lives is warned of the same way, with
// the session's state (suspended), and once it is back the log says so,
// lastError is gone from GET /v1/session and /readyz is 200 again.
func TestZooKeeperBackIsSaid(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	// A session timeout long enough for the session to outlive the cut.
	car, logs := startLoggedSidecar(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", "30s")
	car.WaitReady(t)
	if le, ok := car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["lastError"]; ok {
		t.Fatalf("connected, GET /v1/session shows lastError %v", le)
	}

	proxy.Cut()
	testutil.Eventually(t, 60*time.Second, "a warning of the lost connection", func() bool {
		for _, w := range unreachableWarnings(logs.String()) {
			if w.Level == "WARN" && strings.Contains(w.Servers, proxy.Addr()) && w.Err != "" && w.State == "suspended" {
				return true
			}
		}
		return false
	})
	if le := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["lastError"]); !strings.Contains(le, proxy.Addr()) {
		t.Errorf("suspended, GET /v1/session lastError %q: want the server %s and its error", le, proxy.Addr())
	}

	proxy.Restore()
	testutil.Eventually(t, 60*time.Second, "the log says ZooKeeper is reachable again", func() bool {
		return strings.Contains(logs.String(), `"msg":"zookeeper reachable again"`)
	})
	car.WaitReady(t)
	testutil.Eventually(t, 30*time.Second, "lastError gone once connected", func() bool {
		b := car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body
		_, ok := b["lastError"]
		return b["state"] == "connected" && !ok
	})
}
