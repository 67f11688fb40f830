package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// cliRun is a verb that runs until it is interrupted (lease keepalive, elect
// --observe), run in the test's process: its stdout read line by line.
type cliRun struct {
	lines  chan string
	send   chan<- os.Signal
	code   chan int
	mu     sync.Mutex
	stderr bytes.Buffer
}

func (r *cliRun) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.Write(p)
}

func (r *cliRun) errText() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

func startCLI(t *testing.T, env map[string]string, args ...string) *cliRun {
	t.Helper()
	sig, send := sidecartest.NewSignals(t)
	r := &cliRun{lines: make(chan string, 100), send: send, code: make(chan int, 1)}
	pr, pw := io.Pipe()
	go func() {
		getenv := func(k string) string { return env[k] }
		var code int
		if run, ok := ctl.Wrappers[args[0]]; ok {
			code = run(sig, args[1:], getenv, pw, r)
		} else {
			code = ctl.RunCLI(sig, args, getenv, strings.NewReader(""), pw, r)
		}
		pw.Close()
		r.code <- code
	}()
	go func() {
		defer close(r.lines)
		s := bufio.NewScanner(pr)
		for s.Scan() {
			r.lines <- s.Text()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	return r
}

// next is the next line the verb writes.
func (r *cliRun) next(t *testing.T) string {
	t.Helper()
	select {
	case line, ok := <-r.lines:
		if !ok {
			t.Fatalf("the verb ended; stderr %q", r.errText())
		}
		return line
	case <-time.After(testutil.Patience(30 * time.Second)):
		t.Fatalf("no line within 30s; stderr %q", r.errText())
		return ""
	}
}

// exit is the verb's exit code.
func (r *cliRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case c := <-r.code:
		return c
	case <-time.After(testutil.Patience(30 * time.Second)):
		t.Fatalf("the verb did not exit; stderr %q", r.errText())
		return 0
	}
}

// lease list writes every lease, one line of JSON each, following every page
// (here two at a time); --prefix narrows it; a lease revoked is gone from it.
func TestCLILeaseList(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "lease", "list").want(t, 0, "")
	var ids []string
	for range 5 {
		r := cli(t, env, "", "lease", "grant", "60s")
		r.want(t, 0, "*")
		ids = append(ids, strings.TrimSpace(r.stdout))
	}
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/l1?lease="+ids[2])
	list := func(args ...string) map[string][]any {
		t.Helper()
		r := cli(t, env, "", append([]string{"lease", "list"}, args...)...)
		r.want(t, 0, "*")
		got := map[string][]any{}
		for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
			var l struct {
				Lease, TTL, ExpiresAt string
				Holds                 []any
			}
			if err := json.Unmarshal([]byte(line), &l); err != nil || l.Lease == "" || l.ExpiresAt == "" {
				t.Fatalf("line %q of %q: %v", line, r.stdout, err)
			}
			if _, dup := got[l.Lease]; dup {
				t.Fatalf("lease %s listed twice: %q", l.Lease, r.stdout)
			}
			got[l.Lease] = l.Holds
		}
		return got
	}
	for _, args := range [][]string{nil, {"--page-size", "2"}, {"--page-size", "1"}} {
		got := list(args...)
		if len(got) != 5 || len(got[ids[2]]) != 1 {
			t.Fatalf("lease list %q: %v; want the 5 leases, %s holding l1", args, got, ids[2])
		}
	}
	if got := list("--prefix", ids[3]); len(got) != 1 || got[ids[3]] == nil {
		t.Fatalf("--prefix %s: %v", ids[3], got)
	}
	cli(t, env, "", "lease", "revoke", ids[0]).want(t, 0, "")
	if got := list("--page-size", "2"); len(got) != 4 {
		t.Fatalf("after a revoke: %v", got)
	}
	cli(t, env, "", "lease", "list", "--page-size", "0").want(t, 0, "*")
	cli(t, env, "", "lease", "list", "--page-size", "20000").want(t, ctl.ExitUsage, "") // 400
	if r := cli(t, env, "", "lease", "list", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Exit codes") {
		t.Fatalf("lease list --help: %d %q", r.code, r.stdout)
	}
}

// lease keepalive keeps the lease alive past its ttl, writing its new expiry
// each time, until SIGINT (130); it exits 1 once the lease is revoked.
func TestCLILeaseKeepaliveLoop(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	grant := func() string {
		r := cli(t, env, "", "lease", "grant", "2s")
		r.want(t, 0, "*")
		return strings.TrimSpace(r.stdout)
	}
	id := grant()
	run := startCLI(t, env, "lease", "keepalive", id)
	expiry := func() time.Time {
		t.Helper()
		line := run.next(t)
		var l struct {
			Lease     string
			ExpiresAt time.Time
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil || l.Lease != id {
			t.Fatalf("line %q: %v", line, err)
		}
		return l.ExpiresAt
	}
	first := expiry()
	// Past the lease's ttl (2s) without any other keepalive: the lease lives.
	deadline := time.Now().Add(5 * time.Second)
	last := first
	for time.Now().Before(deadline) {
		e := expiry()
		if !e.After(last) {
			t.Fatalf("expiry %s after %s: not pushed", e, last)
		}
		last = e
	}
	car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+id)
	run.send <- syscall.SIGINT
	if code := run.exit(t); code != 128+int(syscall.SIGINT) {
		t.Fatalf("after SIGINT: exit %d, stderr %q", code, run.errText())
	}

	id = grant()
	run = startCLI(t, env, "lease", "keepalive", id)
	expiry()
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+id)
	if code := run.exit(t); code != ctl.ExitNotFound || !strings.Contains(run.errText(), "coord-sidecar lease keepalive: ") {
		t.Fatalf("after the lease was revoked: exit %d, stderr %q", code, run.errText())
	}
	if r := cli(t, env, "", "lease", "keepalive", "--help"); r.code != 0 || !strings.Contains(r.stdout, "-once") || !strings.Contains(r.stdout, "Exit codes") {
		t.Fatalf("lease keepalive --help: %d %q", r.code, r.stdout)
	}
}

// kv put --version is a compare-and-set (a mismatch exits 65 and writes
// nothing; -1 creates only); kv put --lease makes the key go with its lease.
func TestCLIKeyVersionAndLease(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "kv", "put", "--version", "-1", "cas", "v0").want(t, 0, "")
	r := cli(t, env, "", "kv", "put", "--version", "-1", "cas", "again")
	r.want(t, ctl.ExitConflict, "")
	if !strings.Contains(r.err, "coord-sidecar kv put: ") {
		t.Fatalf("mismatch: stderr %q", r.err)
	}
	version := car.Must(t, http.StatusOK, http.MethodGet, "/v1/kv/cas").Header.Get("Version")
	cli(t, env, "", "kv", "put", "--version", "7", "cas", "stale").want(t, ctl.ExitConflict, "")
	cli(t, env, "", "kv", "get", "cas").want(t, 0, "v0")
	cli(t, env, "", "kv", "put", "--version", version, "cas", "v1").want(t, 0, "")
	cli(t, env, "", "kv", "put", "--version", version, "cas", "v2").want(t, ctl.ExitConflict, "") // the version moved on
	cli(t, env, "", "kv", "get", "cas").want(t, 0, "v1")
	cli(t, env, "", "kv", "put", "--version", "x", "cas", "v").want(t, ctl.ExitUsage, "")
	cli(t, env, "", "kv", "put", "--version", "-2", "cas", "v").want(t, ctl.ExitUsage, "")

	r = cli(t, env, "", "lease", "grant", "60s")
	r.want(t, 0, "*")
	lease := strings.TrimSpace(r.stdout)
	cli(t, env, "", "kv", "put", "--lease", lease, "eph", "here").want(t, 0, "")
	cli(t, env, "", "kv", "put", "--lease", lease, "cas", "taken").want(t, ctl.ExitConflict, "") // exists, not the lease's
	if holds := string(car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease).Raw); !strings.Contains(holds, `"name":"eph"`) {
		t.Fatalf("the lease does not hold the key: %s", holds)
	}
	cli(t, env, "", "kv", "get", "eph").want(t, 0, "here")
	cli(t, env, "", "lease", "revoke", lease).want(t, 0, "")
	cli(t, env, "", "kv", "get", "eph").want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "kv", "put", "--lease", lease, "eph", "x").want(t, ctl.ExitNotFound, "") // the lease is gone
	if r := cli(t, env, "", "kv", "put", "--help"); r.code != 0 || !strings.Contains(r.stdout, "-version") || !strings.Contains(r.stdout, "Exit codes") {
		t.Fatalf("kv put --help: %d %q", r.code, r.stdout)
	}
}

// kv get --prefix writes every key under the prefix (key line, value line),
// across pages, in name order; --json one line of JSON per key; KEY and
// --prefix together, or neither, are a usage error.
func TestCLIKeyPrefix(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "kv", "get", "--prefix", "app").want(t, 0, "")
	for _, kv := range [][2]string{{"app-b", "2"}, {"app-a", "1"}, {"app-c", "3"}, {"other", "x"}} {
		cli(t, env, "", "kv", "put", kv[0], kv[1]).want(t, 0, "")
	}
	cli(t, env, "", "kv", "put", "app-d", "\xff\x00").want(t, 0, "")
	want := "app-a\n1\napp-b\n2\napp-c\n3\napp-d\n\xff\x00\n"
	cli(t, env, "", "kv", "get", "--prefix", "app").want(t, 0, want)
	cli(t, env, "", "kv", "get", "--prefix", "app", "--page-size", "1").want(t, 0, want)
	cli(t, env, "", "kv", "get", "--prefix", "").want(t, 0, want+"other\nx\n")
	r := cli(t, env, "", "kv", "get", "--prefix", "app-", "--json", "--page-size", "3")
	r.want(t, 0, "*")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("--json wrote %q", r.stdout)
	}
	var s struct {
		Key, Value, ContentType string
		ValueBase64             []byte
		Version                 int
	}
	if err := json.Unmarshal([]byte(lines[0]), &s); err != nil || s.Key != "app-a" || s.Value != "1" || s.ContentType != "application/octet-stream" {
		t.Fatalf("line %q: %v", lines[0], err)
	}
	s.Value = ""
	if err := json.Unmarshal([]byte(lines[3]), &s); err != nil || s.Key != "app-d" || s.Value != "" || string(s.ValueBase64) != "\xff\x00" {
		t.Fatalf("line %q: %v", lines[3], err)
	}
	for _, args := range [][]string{{"kv", "get", "--prefix", "a", "k"}, {"kv", "get", "--json", "k"}} {
		if r := cli(t, env, "", args...); r.code != ctl.ExitUsage || !strings.Contains(r.err, "usage:") {
			t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.err)
		}
	}
	if r := cli(t, env, "", "kv", "get", "--help"); r.code != 0 || !strings.Contains(r.stdout, "-prefix") || !strings.Contains(r.stdout, "Exit codes") {
		t.Fatalf("kv get --help: %d %q", r.code, r.stdout)
	}
}

// newLease grants a lease of 60s on car and returns its id.
func newLease(t *testing.T, car *sidecartest.Sidecar) string {
	t.Helper()
	return sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
}

// elect --observe writes the leader's id at once, then each new leader's, a
// line each (a candidate joining the line behind the leader writes nothing),
// until SIGTERM (143).
func TestCLIElectObserve(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	l1, l2 := newLease(t, car), newLease(t, car)
	run := startCLI(t, env, "elect", "--observe", "e1")
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/elections/e1/candidates?id=a&lease="+l1)
	if got := run.next(t); got != "a" {
		t.Fatalf("first leader %q, want a", got)
	}
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/elections/e1/candidates?id=b&lease="+l2)
	late := startCLI(t, env, "elect", "--observe", "e1")
	if got := late.next(t); got != "a" {
		t.Fatalf("an observer that starts late writes %q at once, want a", got)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+l1)
	for _, r := range []*cliRun{run, late} {
		if got := r.next(t); got != "b" { // b's enrolment behind a wrote nothing
			t.Fatalf("after a's lease ended: %q, want b", got)
		}
		r.send <- syscall.SIGTERM
		if code := r.exit(t); code != 128+int(syscall.SIGTERM) {
			t.Fatalf("after SIGTERM: exit %d, stderr %q", code, r.errText())
		}
	}
	var out, errb bytes.Buffer
	if code := ctl.RunElect(sidecartest.QuietSignals(t), []string{"--observe", "--help"}, func(string) string { return "" }, &out, &errb); code != 0 ||
		!strings.Contains(out.String(), "usage: coord-sidecar elect [flags] --observe NAME") || !strings.Contains(out.String(), "Exit codes") {
		t.Fatalf("elect --observe --help: exit %d, %q", code, out.String())
	}
	out.Reset()
	if code := ctl.RunElect(sidecartest.QuietSignals(t), []string{"--observe", "e1", "extra"}, func(string) string { return "" }, &out, &errb); code != ctl.ExitUsage {
		t.Fatalf("elect --observe e1 extra: exit %d", code)
	}
	if code := ctl.RunElect(sidecartest.QuietSignals(t), []string{"--help"}, func(string) string { return "" }, &out, &errb); code != 0 || !strings.Contains(out.String(), "--observe NAME") {
		t.Fatalf("elect --help: exit %d, %q", code, out.String())
	}
}

// barrier wait returns 0 once the barrier is lowered (at once when it is
// not raised), 75 when --wait ends first, 128+N on a signal.
func TestCLIBarrierWait(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "barrier", "wait", "b").want(t, 0, "")
	car.Must(t, http.StatusNoContent, http.MethodPut, "/v1/barriers/b")
	r := cli(t, env, "", "barrier", "wait", "--wait", "200ms", "b")
	r.want(t, ctl.ExitNotAcquired, "")
	if !strings.Contains(r.err, "coord-sidecar barrier wait: ") {
		t.Fatalf("stderr %q", r.err)
	}
	waiter := startCLI(t, env, "barrier", "wait", "b")
	interrupted := startCLI(t, env, "barrier", "wait", "b")
	interrupted.send <- syscall.SIGINT
	if code := interrupted.exit(t); code != 128+int(syscall.SIGINT) {
		t.Fatalf("after SIGINT: exit %d, stderr %q", code, interrupted.errText())
	}
	select {
	case code := <-waiter.code:
		t.Fatalf("barrier wait exited %d while the barrier was raised; stderr %q", code, waiter.errText())
	case <-time.After(500 * time.Millisecond):
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/barriers/b")
	if code := waiter.exit(t); code != 0 {
		t.Fatalf("after the barrier was lowered: exit %d, stderr %q", code, waiter.errText())
	}
	cli(t, env, "", "barrier", "wait", "--wait", "soon", "b").want(t, ctl.ExitUsage, "")
	if r := cli(t, env, "", "barrier", "wait", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Exit codes") {
		t.Fatalf("barrier wait --help: %d %q", r.code, r.stdout)
	}
}

// queue take --claim writes the claim id, then the item's bytes; the item
// is hidden until acked (queue ack deletes it) or the claim's ttl ends (it
// comes back); an empty queue exits 1, an ack of a claim gone exits 1.
func TestCLIQueueClaim(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "queue", "take", "--claim", "jobs").want(t, ctl.ExitNotFound, "")
	raw := "line 1\nline 2\x00"
	cli(t, env, "", "queue", "put", "jobs", raw).want(t, 0, "")
	cli(t, env, "", "queue", "put", "jobs", "second").want(t, 0, "")
	claim := func(args ...string) (string, string) {
		t.Helper()
		r := cli(t, env, "", append([]string{"queue", "take", "--claim"}, args...)...)
		r.want(t, 0, "*")
		id, item, ok := strings.Cut(r.stdout, "\n")
		if !ok || id == "" {
			t.Fatalf("claim wrote %q", r.stdout)
		}
		return id, item
	}
	id, item := claim("jobs")
	if item != raw {
		t.Fatalf("claimed %q, want %q", item, raw)
	}
	id2, item2 := claim("--ttl", "1s", "jobs")
	if item2 != "second" {
		t.Fatalf("second claim %q: the first item was not hidden", item2)
	}
	cli(t, env, "", "queue", "take", "--claim", "--wait", "100ms", "jobs").want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "queue", "ack", "jobs", id).want(t, 0, "")
	cli(t, env, "", "queue", "ack", "jobs", id).want(t, ctl.ExitNotFound, "")
	// The unacked claim's 1s lease ends: its item comes back.
	testutil.Eventually(t, 20*time.Second, "the unacked item comes back", func() bool {
		r := cli(t, env, "", "queue", "take", "jobs")
		return r.code == 0 && r.stdout == "second"
	})
	cli(t, env, "", "queue", "ack", "jobs", id2).want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "queue", "take", "--ttl", "5s", "jobs").want(t, ctl.ExitUsage, "")
	if r := cli(t, env, "", "queue", "take", "--help"); r.code != 0 || !strings.Contains(r.stdout, "-claim") || !strings.Contains(r.stdout, "Exit codes") {
		t.Fatalf("queue take --help: %d %q", r.code, r.stdout)
	}
	if r := cli(t, env, "", "queue", "ack", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Exit codes") {
		t.Fatalf("queue ack --help: %d %q", r.code, r.stdout)
	}
}
