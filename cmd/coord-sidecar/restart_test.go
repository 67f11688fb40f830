package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// restartable is a coord-sidecar process on a state directory, started again
// on the same address and directory after it is killed.
type restartable struct {
	bin, addr, state string
	args             []string
	cmd              *exec.Cmd
	exited           chan struct{} // closed once cmd has ended
	// witness, when set (restartPair), is a session of r's timeout that
	// dies with r's process in restartPastTimeout.
	witness *zktest.Witness
	// logFile gets everything every process of r writes to stderr (its JSON
	// log): a file, not a pipe, so that the process's end is seen at its
	// exit even while a successor it started holds the same stderr.
	logFile string
}

// logs is everything r's processes have logged so far.
func (r *restartable) logs(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(r.logFile)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

func newRestartable(t testing.TB, zk []string, root string, timeout string) *restartable {
	t.Helper()
	dir := t.TempDir()
	r := &restartable{bin: sidecartest.BuildBinary(t), addr: sidecartest.FreeAddr(t), state: filepath.Join(dir, "state"), logFile: filepath.Join(dir, "log")}
	r.args = []string{"--listen", r.addr, "--zk", strings.Join(zk, ","), "--zk-root", root,
		"--session-timeout", timeout, "--state-dir", r.state}
	t.Cleanup(func() {
		if t.Failed() { // what its processes said, for the failure's reader
			t.Logf("the sidecar processes' log:\n%s", r.logs(t))
		}
	})
	return r
}

// restartPair starts, under a root of t's own on zkc, a sidecar process on a
// state directory with the session timeout given (r, first started as a) and
// an in-process sidecar beside it (b): the one to kill and start again, and
// the one that watches.
func restartPair(t *testing.T, zkc *zktest.Cluster, timeout string) (r *restartable, a, b *sidecartest.Sidecar) {
	t.Helper()
	root := zktest.Root(t)
	r = newRestartable(t, zkc.Servers(), root, timeout)
	d, err := time.ParseDuration(timeout)
	if err != nil {
		t.Fatal(err)
	}
	r.witness = zktest.StartWitness(t, zkc.Servers(), d)
	return r, r.start(t), sidecartest.Start(t, zkc.Servers(), root)
}

// restartOnEnsemble begins a restart test on a 3-node ensemble: the test runs
// in parallel (it mostly waits on processes and a session timeout: see
// TestMain) and not under -short (it builds the binary), on a restartPair of
// the shared ensemble with a 4 s session timeout, and a lease of 60 s made
// through a.
func restartOnEnsemble(t *testing.T) (r *restartable, a, b *sidecartest.Sidecar, lease string) {
	t.Helper()
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and starts an ensemble")
	}
	r, a, b = restartPair(t, zktest.SharedEnsemble(t), "4s")
	lease = sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	return r, a, b, lease
}

// restartPastTimeout kills r's process with SIGKILL, starts it again at once
// and returns the successor once its session timeout has passed since the
// kill (the old session would have expired by then had nobody resumed it:
// r's witness, dying after the kill, has expired), with the time of the kill.
func (r *restartable) restartPastTimeout(t *testing.T) (*sidecartest.Sidecar, time.Time) {
	t.Helper()
	r.kill(t)
	killed := time.Now()
	r.witness.Die(t)
	a := r.start(t)
	t.Logf("ready %s after SIGKILL", time.Since(killed).Round(time.Millisecond))
	r.witness.AwaitExpired(t, testutil.Patience(30*time.Second))
	return a, killed
}

// start runs the process and waits until it is ready (its resume, if any,
// reconciled).
func (r *restartable) start(t testing.TB) *sidecartest.Sidecar {
	t.Helper()
	s := r.spawn(t, r.args)
	s.WaitReady(t)
	return s
}

// spawn runs the process with args (r.args, or a variant of them) and returns
// at once, without waiting for it to be ready: r.exited closes when it ends.
func (r *restartable) spawn(t testing.TB, args []string) *sidecartest.Sidecar {
	t.Helper()
	r.cmd = exec.Command(r.bin, args...)
	logs, err := os.OpenFile(r.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer logs.Close()
	r.cmd.Stderr = logs
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := r.cmd, make(chan struct{})
	r.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	return &sidecartest.Sidecar{Base: "http://" + r.addr}
}

// kill ends the process with SIGKILL and waits for it to be gone.
func (r *restartable) kill(t testing.TB) {
	t.Helper()
	if err := r.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-r.exited
}

// upgradeAndAwaitExit sends the process SIGUSR2 and waits for it (the old
// one) to exit.
func (r *restartable) upgradeAndAwaitExit(t testing.TB) {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.exited:
	case <-time.After(testutil.Patience(time.Minute)):
		t.Fatalf("the old process did not exit after SIGUSR2; its log:\n%s", r.logs(t))
	}
}

// savedState is the state in the directory as it is now (the base with its
// journal replayed), as JSON; "" when there is none.
func (r *restartable) savedState(t testing.TB) string {
	t.Helper()
	st, err := statedir.Read(r.state)
	if errors.Is(err, statedir.ErrNoState) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A sidecar killed with SIGKILL and started again on the same --state-dir
// keeps its lease and its lock, checked after the old process's session
// timeout has passed: the same lease id, the same fencing token. Another
// sidecar waiting for the lock is not granted and its stream never shows
// another holder; the request that was waiting on the killed sidecar leaves no
// node behind; released later through the successor, the lock passes on with
// a higher token. On a 3-node ensemble.
func TestRestartKeepsALockAndItsLease(t *testing.T) {
	r, a, b, lease := restartOnEnsemble(t)

	token := sidecartest.Num(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/kept?owner=a&lease="+lease).Body["fencingToken"])
	waiting := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	go func() { _, _ = a.FaultCall(time.Minute, http.MethodPost, "/v1/locks/kept?wait=50s&lease="+waiting) }()
	granted := make(chan *sidecartest.Response, 1)
	go func() {
		resp, err := b.FaultCall(2*time.Minute, http.MethodPost, "/v1/locks/kept?wait=100s&owner=b")
		if err != nil {
			resp = &sidecartest.Response{Status: -1, Raw: []byte(err.Error())}
		}
		granted <- resp
	}()
	testutil.Eventually(t, 10*time.Second, "a waiter on each sidecar", func() bool {
		return sidecartest.Num(b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/kept").Body["waiters"]) == 2
	})
	events := sidecartest.FollowEvents(t, b, "/v1/locks/kept/events")
	testutil.Eventually(t, 10*time.Second, "the lease and its lock saved", func() bool {
		st := r.savedState(t)
		return strings.Contains(st, lease) && strings.Contains(st, `"kind":"lock"`)
	})

	a, killed := r.restartPastTimeout(t)

	resumedAt := sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["resumedAt"])
	if at, err := time.Parse(time.RFC3339Nano, resumedAt); err != nil || at.Before(killed) {
		t.Fatalf("GET /v1/session: resumedAt %q (%v); want the time of the resume, after the kill", resumedAt, err)
	}
	page := browsertest.Start(t)
	page.Call(t, "Page.navigate", map[string]any{"url": a.Base + "/ui/"})
	page.Await(t, 30*time.Second, "the status page says the session was resumed", fmt.Sprintf(
		`document.getElementById('resumed')?.hidden === false && document.getElementById('resumed')?.dataset.at === %q`, resumedAt))

	detail := a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
	if !strings.Contains(string(detail.Raw), `"kind":"lock","name":"kept"`) {
		t.Fatalf("the resumed lease %s: %s; want it holding lock kept", lease, detail.Raw)
	}
	st := b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/kept").Body
	holder, _ := st["holder"].(map[string]any)
	if sidecartest.Num(holder["fencingToken"]) != token || sidecartest.Str(holder["owner"]) != "a" || sidecartest.Num(st["waiters"]) != 1 {
		t.Fatalf("after the restart the other sidecar sees %v; want holder a with token %d and 1 waiter (its own: the killed sidecar's waiting node is gone)", st, token)
	}
	for _, ev := range events.Events() {
		if h, ok := ev.Data["holder"].(map[string]any); ok && sidecartest.Num(h["fencingToken"]) != token {
			t.Fatalf("the other sidecar's stream showed another holder: %s", ev.Data)
		}
	}
	select {
	case resp := <-granted:
		t.Fatalf("the other sidecar's waiter answered while the lock was kept: %d %s", resp.Status, resp.Raw)
	default:
	}

	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/kept?lease="+lease)
	resp := <-granted
	if resp.Status != http.StatusCreated || sidecartest.Num(resp.Body["fencingToken"]) <= token {
		t.Fatalf("after the release the waiter got %d %s; want the lock with a token above %d", resp.Status, resp.Raw, token)
	}
}

// Started after its session expired, the successor starts a new session: the
// old lease answers 404 lease-not-found, what it held went to others (a waiter
// on another sidecar was granted the lock), and the outcome is counted.
func TestRestartTooLate(t *testing.T) {
	t.Parallel() // mostly waiting on processes and a session timeout: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	r, a, b := restartPair(t, zktest.Shared(t), "1s")
	lease := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	token := sidecartest.Num(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/late?owner=a&lease="+lease).Body["fencingToken"])
	testutil.Eventually(t, 10*time.Second, "the lease saved", func() bool { return strings.Contains(r.savedState(t), lease) })

	r.kill(t)
	g := b.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/late?owner=b&wait=60s")
	if sidecartest.Num(g.Body["fencingToken"]) <= token {
		t.Fatalf("the other sidecar got the lock with token %v, want above %d", g.Body["fencingToken"], token)
	}
	a = r.start(t)
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+lease)
	if v := sidecartest.MetricValue(t, a, `coord_restarts_total{outcome="too_late"}`); v != 1 {
		t.Fatalf("coord_restarts_total{outcome=\"too_late\"} = %v, want 1", v)
	}
	if !strings.Contains(r.logs(t), "did not come back") {
		t.Fatalf("no log line says the session did not come back:\n%s", r.logs(t))
	}
}

// A second process on a state directory in use never serves it: it exits at
// once with an error naming the directory's owner, and the first keeps its
// session.
func TestStateDirHasOneOwner(t *testing.T) {
	t.Parallel() // see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	r := newRestartable(t, zkc.Servers(), zktest.Root(t), "4s")
	a := r.start(t)
	before := sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	args := append([]string(nil), r.args...)
	args[1] = sidecartest.FreeAddr(t) // --listen's value
	out, err := exec.Command(r.bin, args...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use") || !strings.Contains(string(out), strconv.Itoa(r.cmd.Process.Pid)) {
		t.Fatalf("a second process on the state directory: %v, printed %s; want an exit naming pid %d", err, out, r.cmd.Process.Pid)
	}
	if after := sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"]); after != before {
		t.Fatalf("the first process's session went from %s to %s", before, after)
	}
}

// A state file the successor cannot use (not JSON, cut short, another format
// version, written for another --zk) is never half-used: a clear log line, the
// file moved aside for inspection, a new session holding nothing, counted.
func TestRestartWithABadStateFile(t *testing.T) {
	t.Parallel() // see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	r := newRestartable(t, zkc.Servers(), root, "4s")
	other := statedir.State{ZK: "elsewhere:2181", Root: root, Session: statedir.Session{ID: 42, Password: make([]byte, 16), Timeout: time.Second}}
	valid, err := json.Marshal(other)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct{ name, file string }{
		{"not JSON", "this is not a state file"},
		{"cut short", `{"format":1,"zk":"` + strings.Join(zkc.Servers(), ",") + `","root":"` + root + `","sess`},
		{"another format", `{"format":99,"zk":"` + strings.Join(zkc.Servers(), ",") + `","root":"` + root + `"}`},
		{"another --zk", strings.Replace(string(valid), `"format":0`, `"format":1`, 1)},
	} {
		if err := os.MkdirAll(r.state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(r.state, "state.json"), []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		a := r.start(t)
		if got := sidecartest.MetricValue(t, a, `coord_restarts_total{outcome="bad_state"}`); got != 1 {
			t.Errorf("%s: coord_restarts_total{outcome=\"bad_state\"} = %v, want 1", c.name, got)
		}
		if st := a.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body; st["state"] != "connected" || sidecartest.Num(st["leases"]) != 0 {
			t.Errorf("%s: session %v, want a new one holding nothing", c.name, st)
		}
		aside, _ := filepath.Glob(filepath.Join(r.state, "state.json.bad-*"))
		if len(aside) == 0 {
			t.Errorf("%s: the bad file was not kept aside", c.name)
		}
		for _, f := range aside {
			_ = os.Remove(f)
		}
		// The log is written in batches (50 ms): the line is out before the kill.
		testutil.Eventually(t, 10*time.Second, c.name+": its log line written", func() bool {
			return strings.Count(r.logs(t), "state file not used") == i+1
		})
		r.kill(t)
	}
	if n := strings.Count(r.logs(t), "state file not used"); n != 4 {
		t.Fatalf("%d log lines say the state file was not used, want 4:\n%s", n, r.logs(t))
	}
}

// SIGUSR2 under a client loop: the successor takes the sockets (the admin
// listener's too) and the session, no request fails (keepalives on fresh
// connections, reads on kept-alive ones, probes of the admin listener), the lease's keepalive stream ends with a retry hint and the lease is
// not revoked, the lock keeps its token, the pid file names the successor and
// the old process exits 0.
func TestUpgradeFailsNoRequest(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	r := newRestartable(t, zkc.Servers(), zktest.Root(t), "4s")
	admin := sidecartest.FreeAddr(t)
	r.args = append(r.args, "--admin-listen", admin)
	a := r.start(t)
	old := r.cmd.Process.Pid
	lease := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30s").Body["lease"])
	token := sidecartest.Num(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/upgraded?owner=a&lease="+lease).Body["fencingToken"])
	stream := sidecartest.FollowEvents(t, a, "/v1/leases/"+lease+"/events")

	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	kept := &http.Client{Timeout: time.Minute}
	stop := make(chan struct{})
	type tally struct {
		ok     int
		failed []string
	}
	results := make(chan tally, 3)
	loop := func(c *http.Client, method, path string) {
		var n tally
		defer func() { results <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			url := a.Base + path
			if strings.HasPrefix(path, "http://") {
				url = path
			}
			req, _ := http.NewRequest(method, url, nil)
			resp, err := c.Do(req)
			if err != nil {
				n.failed = append(n.failed, err.Error())
				continue
			}
			resp.Body.Close()
			if resp.StatusCode >= 300 {
				n.failed = append(n.failed, resp.Status)
				continue
			}
			n.ok++
		}
	}
	go loop(fresh, http.MethodPost, "/v1/leases/"+lease+"/keepalive")
	go loop(kept, http.MethodGet, "/v1/locks/upgraded")
	go loop(fresh, http.MethodGet, "http://"+admin+"/healthz")
	time.Sleep(300 * time.Millisecond)

	r.upgradeAndAwaitExit(t)
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the old process exited %d, want 0; its log:\n%s", code, r.logs(t))
	}
	var pid int
	testutil.Eventually(t, 30*time.Second, "the pid file names the successor", func() bool {
		b, _ := os.ReadFile(filepath.Join(r.state, "coord-sidecar.pid"))
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return pid != 0 && pid != old
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	a.WaitReady(t)
	time.Sleep(300 * time.Millisecond) // the loops go on against the successor
	close(stop)
	for range 3 {
		n := <-results
		if len(n.failed) > 0 || n.ok == 0 {
			t.Errorf("%d requests answered, %d failed: %v", n.ok, len(n.failed), n.failed)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the keepalive stream ended", func() bool {
		stream.Mu.Lock()
		defer stream.Mu.Unlock()
		return stream.Ended
	})
	if evs := stream.Events(); len(evs) == 0 || evs[len(evs)-1].Name != "lease" {
		t.Errorf("the keepalive stream's events: %v; want it ended without the lease's end", evs)
	}
	st := a.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/upgraded").Body
	if h, _ := st["holder"].(map[string]any); sidecartest.Num(h["fencingToken"]) != token {
		t.Fatalf("after the upgrade the lock is %v, want it held with token %d", st, token)
	}
	a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
}
