package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A ZooKeeper server that dies with the sidecar (the one its session was on)
// does not stop the resume: the successor, whose first try meets the dead
// server, resumes the session on another one and keeps the lease and the lock
// (same lease id, same fencing token, another sidecar's waiter not granted).
//
// go-zookeeper shuffles the --zk list, so naming the dead server first does
// not make the successor try it first; the proxies do: those of the live
// servers close every connection until the dead server's proxy has been
// dialed (and has closed the connection at once, its server gone).
func TestRestartResumesPastADeadServer(t *testing.T) {
	t.Parallel() // mostly waiting on processes and a session timeout: see TestMain
	if testing.Short() {
		t.Skip("builds the binary and starts an ensemble")
	}
	g := newZKFaultRig(t)
	h := g.hold(t)

	g.r.kill(t)
	killed := time.Now()
	h.witness.Die(t)
	g.zkc.Kill(g.on)
	dead := g.proxies[g.on]
	tried := dead.Accepted()
	g.cutOthers()
	g.whileStarting(t, func(stop <-chan struct{}) {
		if until(stop, func() bool { return dead.Accepted() > tried }) {
			g.restoreOthers()
		}
	})
	if dead.Accepted() == tried {
		t.Fatal("the successor never tried the dead server")
	}
	h.checkKept(t, g, killed)
	if srv := g.server(t); srv == dead.Addr() {
		t.Fatalf("the successor's session is on %s, the dead server's proxy", srv)
	}
	h.release(t, g)
}

// A ZooKeeper server that dies while the successor reconciles (the session
// given back, the leases not yet restored) does not make the restart fail:
// the successor's session moves to another server and the reconcile goes on
// there, keeping the lease and the lock, and removing the node of the request
// that was waiting at the kill. Made certain with the proxy of the server the
// successor resumes on: it lets that server's first answer through (the
// handshake's) and nothing after, so that the reconcile's sync waits until
// the server is killed and the connection ends. Requests still reach the
// server, so the successor's pings keep the session alive there however long
// a busy machine makes the test take to kill it (with both directions cut, a
// kill later than the session timeout expired the session: once, under a load
// average of 12).
func TestRestartServerDiesWhileReconciling(t *testing.T) {
	t.Parallel() // mostly waiting on processes and a session timeout: see TestMain
	if testing.Short() {
		t.Skip("builds the binary and starts an ensemble")
	}
	// Only the handshake's answer gets through: it is the first thing a server
	// sends on a connection, alone. (Letting a second answer through, to stop
	// while adopting the holds, counted chunks of the stream, not answers: in
	// one suite run of six the adoption's answers came with the sync's and the
	// reconcile finished before the server died. The adoption's retry is
	// kit.Leases.Restore's, through the same Epoch.Retry.)
	g := newZKFaultRig(t)
	h := g.hold(t)

	g.r.kill(t)
	killed := time.Now()
	h.witness.Die(t)
	before := len(g.r.logs(t))
	g.cutOthers()
	g.proxies[g.on].MuteAfter(1)
	g.whileStarting(t, func(stop <-chan struct{}) {
		// The session is given back and connected: the reconcile has begun.
		begun := until(stop, func() bool {
			b, _ := os.ReadFile(g.r.logFile)
			logs := string(b[min(before, len(b)):])
			return strings.Contains(logs, `"msg":"zookeeper session resumed"`) && strings.Contains(logs, `"event":"connected"`)
		})
		if begun {
			g.restoreOthers()
			g.zkc.Kill(g.on) // reports nothing to t: the ensemble is zktest's own
			g.proxies[g.on].Cut()
		}
	})
	logs := g.r.logs(t)[before:]
	if !strings.Contains(logs, `"event":"reconnected"`) {
		t.Fatalf("the successor's session never moved to another server; its log:\n%s", logs)
	}
	h.checkKept(t, g, killed)
	if v := sidecartest.MetricValue(t, g.a, `coord_restarts_total{outcome="failed"}`); v != 0 {
		t.Fatalf(`coord_restarts_total{outcome="failed"} = %v, want 0`, v)
	}
	if v := sidecartest.MetricValue(t, g.a, "coord_restart_holds_lost_total"); v != 0 {
		t.Fatalf("coord_restart_holds_lost_total = %v, want 0", v)
	}
	h.release(t, g)
}

// zkFaultRig is a 3-node ensemble of the test's own with a proxy in front of
// each node; a sidecar process on a state directory (r, now a) that reaches
// the ensemble only through the proxies, its session on node on (a follower:
// killing it elects no new leader); and an in-process sidecar (b) on the two
// other nodes directly, which the faults at node on never reach.
type zkFaultRig struct {
	zkc     *zktest.Cluster
	proxies []*faultproxy.Proxy
	on      int
	r       *restartable
	a, b    *sidecartest.Sidecar
}

func newZKFaultRig(t *testing.T) *zkFaultRig {
	t.Helper()
	g := &zkFaultRig{zkc: zktest.StartEnsemble(t, 3)}
	leader := -1
	testutil.Eventually(t, 30*time.Second, "the ensemble's leader", func() bool {
		leader = g.zkc.Leader()
		return leader >= 0
	})
	g.on = (leader + 1) % 3
	var zk, others []string
	for i, srv := range g.zkc.Servers() {
		g.proxies = append(g.proxies, faultproxy.Start(t, srv))
		if i != g.on {
			others = append(others, srv)
		}
	}
	zk = append(zk, g.proxies[g.on].Addr()) // as an operator would list them: the node that dies first
	for i, p := range g.proxies {
		if i != g.on {
			zk = append(zk, p.Addr())
		}
	}
	root := zktest.Root(t)
	g.r = newRestartable(t, zk, root, "6s")
	g.cutOthers()
	g.a = g.r.start(t)
	g.restoreOthers()
	if srv := g.server(t); srv != g.proxies[g.on].Addr() {
		t.Fatalf("the sidecar's session is on %s, want %s (node %d)", srv, g.proxies[g.on].Addr(), g.on)
	}
	g.b = sidecartest.Start(t, others, root, "--session-timeout", "6s")
	return g
}

// live are the servers (not their proxies) of the nodes no test kills.
func (g *zkFaultRig) live() []string {
	var out []string
	for i, srv := range g.zkc.Servers() {
		if i != g.on {
			out = append(out, srv)
		}
	}
	return out
}

// server is the address a's session is connected to.
func (g *zkFaultRig) server(t *testing.T) string {
	t.Helper()
	return sidecartest.Str(g.a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["server"])
}

func (g *zkFaultRig) cutOthers() {
	for i, p := range g.proxies {
		if i != g.on {
			p.Cut()
		}
	}
}

func (g *zkFaultRig) restoreOthers() {
	for i, p := range g.proxies {
		if i != g.on {
			p.Restore()
		}
	}
}

// whileStarting starts the successor (g.a once it is ready) while fault runs
// on a goroutine of its own, and returns once both have. fault must return
// when stop closes: once the successor is ready, or the start failed the
// test.
func (g *zkFaultRig) whileStarting(t *testing.T, fault func(stop <-chan struct{})) {
	t.Helper()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		fault(stop)
	}()
	defer func() { close(stop); <-done }()
	g.a = g.r.start(t)
}

// until polls cond until it holds (true) or stop closes (false).
func until(stop <-chan struct{}, cond func() bool) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-stop:
			return false
		case <-tick.C:
		}
	}
	return true
}

// zkFaultHold is what a holds when it is killed: a lease with lock zkfault
// (its token), the session it holds them under, and b's waiter for the lock
// (granted gets its answer). A second request of a, on another lease, waits
// for the lock too: the successor must remove its node.
type zkFaultHold struct {
	lease, session string
	token          int64
	granted        chan *sidecartest.Response
	// witness is a session of a's timeout on the nodes that stay up, dying
	// just after a is killed: once it has expired, so would have a's old
	// session had nobody resumed it.
	witness *zktest.Witness
}

func (g *zkFaultRig) hold(t *testing.T) *zkFaultHold {
	t.Helper()
	a, b := g.a, g.b
	h := &zkFaultHold{granted: make(chan *sidecartest.Response, 1), witness: zktest.StartWitness(t, g.live(), 6*time.Second)}
	h.session = sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	h.lease = sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	h.token = sidecartest.Num(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/zkfault?owner=a&lease="+h.lease).Body["fencingToken"])
	waiting := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	go func() { _, _ = a.FaultCall(time.Minute, http.MethodPost, "/v1/locks/zkfault?wait=50s&lease="+waiting) }()
	go func() {
		resp, err := b.FaultCall(2*time.Minute, http.MethodPost, "/v1/locks/zkfault?wait=100s&owner=b")
		if err != nil {
			resp = &sidecartest.Response{Status: -1, Raw: []byte(err.Error())}
		}
		h.granted <- resp
	}()
	testutil.Eventually(t, 10*time.Second, "a waiter on each sidecar", func() bool {
		return sidecartest.Num(b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/zkfault").Body["waiters"]) == 2
	})
	testutil.Eventually(t, 10*time.Second, "the lease and its lock saved", func() bool {
		st := g.r.savedState(t)
		return strings.Contains(st, h.lease) && strings.Contains(st, `"kind":"lock"`)
	})
	return h
}

// checkKept checks, once the old process's session would have expired had
// nobody resumed it, that the successor resumed it and keeps h.
func (h *zkFaultHold) checkKept(t *testing.T, g *zkFaultRig, killed time.Time) {
	t.Helper()
	h.witness.AwaitExpired(t, testutil.Patience(30*time.Second))
	sess := g.a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body
	at, err := time.Parse(time.RFC3339Nano, sidecartest.Str(sess["resumedAt"]))
	if err != nil || at.Before(killed) || sidecartest.Str(sess["sessionId"]) != h.session {
		t.Fatalf("GET /v1/session: %v; want session %s, resumed after the kill", sess, h.session)
	}
	if v := sidecartest.MetricValue(t, g.a, `coord_restarts_total{outcome="resumed"}`); v != 1 {
		t.Fatalf(`coord_restarts_total{outcome="resumed"} = %v, want 1; the log:%s`, v, g.r.logs(t))
	}
	detail := g.a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+h.lease)
	if !strings.Contains(string(detail.Raw), `"kind":"lock","name":"zkfault"`) {
		t.Fatalf("the resumed lease %s: %s; want it holding lock zkfault", h.lease, detail.Raw)
	}
	st := g.b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/zkfault").Body
	holder, _ := st["holder"].(map[string]any)
	if sidecartest.Num(holder["fencingToken"]) != h.token || sidecartest.Str(holder["owner"]) != "a" || sidecartest.Num(st["waiters"]) != 1 {
		t.Fatalf("after the restart the other sidecar sees %v; want holder a with token %d and 1 waiter (its own)", st, h.token)
	}
	select {
	case resp := <-h.granted:
		t.Fatalf("the other sidecar's waiter answered while the lock was kept: %d %s", resp.Status, resp.Raw)
	default:
	}
}

// release lets the lock go through the successor: b's waiter gets it with a
// higher token.
func (h *zkFaultHold) release(t *testing.T, g *zkFaultRig) {
	t.Helper()
	g.a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/zkfault?lease="+h.lease)
	resp := <-h.granted
	if resp.Status != http.StatusCreated || sidecartest.Num(resp.Body["fencingToken"]) <= h.token {
		t.Fatalf("after the release the waiter got %d %s; want the lock with a token above %d", resp.Status, resp.Raw, h.token)
	}
}
