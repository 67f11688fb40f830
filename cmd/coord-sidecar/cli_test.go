package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// cliResult is one run of the command-line client.
type cliResult struct {
	code        int
	stdout, err string
}

// cli runs `coord-sidecar ARGS...` in this process with env as its environment
// and stdin as its input.
func cli(t *testing.T, env map[string]string, stdin string, args ...string) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	code := ctl.RunCLI(sidecartest.QuietSignals(t), args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

// want fails t unless r exited code with stdout out (when out is not "*").
func (r cliResult) want(t *testing.T, code int, out string) {
	t.Helper()
	if r.code != code || (out != "*" && r.stdout != out) {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q", r.code, r.stdout, r.err, code, out)
	}
}

// The kv verbs: values out exactly as stored (from an argument or stdin, any
// bytes), a missing key exits 1 with the problem's detail on stderr.
func TestCLIKeyValue(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	r := cli(t, env, "", "kv", "get", "cfg")
	r.want(t, ctl.ExitNotFound, "")
	if !strings.Contains(r.err, "cfg") {
		t.Fatalf("stderr %q does not give the problem's detail", r.err)
	}
	cli(t, env, "", "kv", "put", "cfg", "v1").want(t, 0, "")
	cli(t, env, "", "kv", "get", "cfg").want(t, 0, "v1")
	raw := "line 1\nline 2\x00\xff"
	cli(t, env, raw, "kv", "put", "cfg").want(t, 0, "")
	cli(t, env, "", "kv", "get", "cfg").want(t, 0, raw)
	got := car.Must(t, http.StatusOK, http.MethodGet, "/v1/kv/cfg")
	if string(got.Raw) != raw || got.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("stored %q as %q", got.Raw, got.Header.Get("Content-Type"))
	}
	cli(t, env, "", "kv", "put", "--content-type", "text/plain", "cfg", "v2").want(t, 0, "")
	if ct := car.Must(t, http.StatusOK, http.MethodGet, "/v1/kv/cfg").Header.Get("Content-Type"); ct != "text/plain" {
		t.Fatalf("Content-Type %q, want text/plain", ct)
	}
	cli(t, env, "", "kv", "delete", "cfg").want(t, 0, "")
	cli(t, env, "", "kv", "delete", "cfg").want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "kv", "get", "cfg").want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "kv", "get", "bad name!").want(t, ctl.ExitUsage, "") // 400 invalid name
}

// kv watch prints the value now, then each change (value and a newline); a
// deletion prints nothing; a signal ends it with 128+N.
func TestCLIKeyWatch(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "kv", "put", "w", "first").want(t, 0, "")
	sig, send := sidecartest.NewSignals(t)
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := ctl.RunCLI(sig, []string{"kv", "watch", "w"}, func(k string) string { return env[k] }, strings.NewReader(""), pw, &errb)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	next := func(want string) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch ended (%v) before %q; stderr %q", lines.Err(), want, errb.String())
		}
		if lines.Text() != want {
			t.Fatalf("watch printed %q, want %q", lines.Text(), want)
		}
	}
	next("first")
	cli(t, env, "", "kv", "put", "w", "second").want(t, 0, "")
	next("second")
	cli(t, env, "", "kv", "delete", "w").want(t, 0, "")
	cli(t, env, "", "kv", "put", "w", "third").want(t, 0, "")
	next("third") // the deletion printed nothing
	send <- syscall.SIGINT
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if code := <-done; code != 128+int(syscall.SIGINT) {
		t.Fatalf("watch exited %d after SIGINT, want %d; stderr %q", code, 128+int(syscall.SIGINT), errb.String())
	}
}

// kv watch --prefix prints every key under the prefix (a line with the key,
// a line with the value), then each change under it, nested keys included;
// a deletion prints nothing, nothing outside the prefix is printed; --help
// describes it.
func TestCLIKeyWatchPrefix(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "kv", "put", "cfg/a", "1").want(t, 0, "")
	if r := cli(t, env, "", "kv", "watch", "--help"); !strings.Contains(r.stdout+r.err, "--prefix") {
		t.Fatalf("kv watch --help does not tell of --prefix: %q %q", r.stdout, r.err)
	}
	sig, send := sidecartest.NewSignals(t)
	pr, pw := io.Pipe()
	var errb bytes.Buffer
	done := make(chan int, 1)
	go func() {
		code := ctl.RunCLI(sig, []string{"kv", "watch", "--prefix", "cfg/"}, func(k string) string { return env[k] }, strings.NewReader(""), pw, &errb)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	next := func(want ...string) {
		t.Helper()
		for _, w := range want {
			if !lines.Scan() {
				t.Fatalf("watch ended (%v) before %q; stderr %q", lines.Err(), w, errb.String())
			}
			if lines.Text() != w {
				t.Fatalf("watch printed %q, want %q", lines.Text(), w)
			}
		}
	}
	next("cfg/a", "1")
	cli(t, env, "", "kv", "put", "other", "x").want(t, 0, "")
	cli(t, env, "", "kv", "put", "cfg/a", "2").want(t, 0, "")
	next("cfg/a", "2")
	cli(t, env, "", "kv", "delete", "cfg/a").want(t, 0, "")
	cli(t, env, "", "kv", "put", "cfg/app/db", "pg").want(t, 0, "")
	// The deletion printed nothing; the parent is an empty value. The parent
	// and its child are two keys, each followed on its own, so they come in
	// either order.
	got := map[string]string{}
	for range 2 {
		if !lines.Scan() {
			t.Fatalf("watch ended (%v) before cfg/app and cfg/app/db; stderr %q", lines.Err(), errb.String())
		}
		key := lines.Text()
		if !lines.Scan() {
			t.Fatalf("watch ended (%v) before %s's value; stderr %q", lines.Err(), key, errb.String())
		}
		got[key] = lines.Text()
	}
	if v, ok := got["cfg/app"]; !ok || v != "" || got["cfg/app/db"] != "pg" {
		t.Fatalf("watch printed %v, want cfg/app empty and cfg/app/db pg", got)
	}
	send <- syscall.SIGINT
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if code := <-done; code != 128+int(syscall.SIGINT) {
		t.Fatalf("watch exited %d after SIGINT, want %d; stderr %q", code, 128+int(syscall.SIGINT), errb.String())
	}
}

// kv watch --json: one line of JSON per state, deletions included.
func TestCLIKeyWatchJSON(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	sig, send := sidecartest.NewSignals(t)
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		code := ctl.RunCLI(sig, []string{"kv", "watch", "--json", "j"}, func(k string) string { return env[k] }, strings.NewReader(""), pw, io.Discard)
		pw.Close()
		done <- code
	}()
	lines := bufio.NewScanner(pr)
	next := func() map[string]any {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch ended: %v", lines.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(lines.Bytes(), &m); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		return m
	}
	if m := next(); m["deleted"] != true {
		t.Fatalf("first state %v, want deleted", m)
	}
	cli(t, env, "", "kv", "put", "j", "a\nb").want(t, 0, "")
	if m := next(); m["value"] != "a\nb" {
		t.Fatalf("state %v, want value a\\nb", m)
	}
	send <- syscall.SIGTERM
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if code := <-done; code != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %d", code)
	}
}

// Counters: exact past 2^53 up to the int64 range; an overflow is refused (65)
// with the problem's detail; a negative DELTA needs no --.
func TestCLICounter(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "counter", "get", "signups").want(t, 0, "0\n")
	cli(t, env, "", "counter", "add", "signups").want(t, 0, "1\n")
	cli(t, env, "", "counter", "add", "signups", "9007199254740992").want(t, 0, "9007199254740993\n") // 2^53+1
	cli(t, env, "", "counter", "add", "signups", "9223372036854775800").want(t, ctl.ExitConflict, "")
	cli(t, env, "", "counter", "add", "signups", "-9007199254740993").want(t, 0, "0\n")
	cli(t, env, "", "counter", "add", "signups", "9223372036854775804").want(t, 0, "9223372036854775804\n")
	cli(t, env, "", "counter", "get", "signups").want(t, 0, "9223372036854775804\n")
	r := cli(t, env, "", "counter", "add", "signups", "4")
	r.want(t, ctl.ExitConflict, "")
	if !strings.Contains(r.err, "coord-sidecar counter add: ") || len(r.err) < len("coord-sidecar counter add: x\n") {
		t.Fatalf("overflow: stderr %q", r.err)
	}
	cli(t, env, "", "counter", "add", "signups", "-4").want(t, 0, "9223372036854775800\n")
	cli(t, env, "", "counter", "add", "signups", "1.5").want(t, ctl.ExitUsage, "")
}

// Queues: items from an argument or stdin, taken in order with their bytes
// exactly; an empty queue exits 1.
func TestCLIQueue(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "queue", "take", "jobs").want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "queue", "put", "jobs", "one").want(t, 0, "")
	raw := "{\"n\": 2}\n\x00"
	cli(t, env, raw, "queue", "put", "jobs").want(t, 0, "")
	cli(t, env, "", "queue", "put", "--priority", "0", "jobs", "three").want(t, 0, "")
	cli(t, env, "", "queue", "take", "jobs").want(t, 0, "one")
	cli(t, env, "", "queue", "take", "jobs").want(t, 0, raw)
	cli(t, env, "", "queue", "take", "--wait", "1s", "jobs").want(t, 0, "three")
	cli(t, env, "", "queue", "take", "--wait", "100ms", "jobs").want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "queue", "put", "jobs").want(t, ctl.ExitUsage, "") // empty stdin: 400 invalid-body
}

// Leases: grant writes the id, keepalive the lease as JSON, revoke ends it; a
// lease that does not exist exits 1; a bad ttl 64.
func TestCLILease(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	r := cli(t, env, "", "lease", "grant", "30s")
	r.want(t, 0, "*")
	id := strings.TrimSuffix(r.stdout, "\n")
	if id == "" || strings.Contains(id, "\n") {
		t.Fatalf("grant wrote %q, want one id", r.stdout)
	}
	car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+id)
	r = cli(t, env, "", "lease", "keepalive", "--once", id)
	r.want(t, 0, "*")
	var lease map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &lease); err != nil || lease["lease"] != id || lease["ttl"] != "30s" || !strings.HasSuffix(r.stdout, "}\n") {
		t.Fatalf("keepalive wrote %q (%v)", r.stdout, err)
	}
	cli(t, env, "", "lease", "revoke", id).want(t, 0, "")
	car.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+id)
	cli(t, env, "", "lease", "revoke", id).want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "lease", "keepalive", "--once", id).want(t, ctl.ExitNotFound, "")
	cli(t, env, "", "lease", "keepalive", id).want(t, ctl.ExitNotFound, "") // without --once: the first keepalive's 404 ends it
	cli(t, env, "", "lease", "grant", "soon").want(t, ctl.ExitUsage, "")
}

// Services: list writes each live instance as one line of JSON in
// registration order, pick one enabled instance by its strategy (round-robin
// takes turns across calls); a service with none lists nothing and picks
// nothing (exit 1); a strategy the sidecar does not know is a 400 (64).
func TestCLIServices(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), steadySession...)
	env := map[string]string{"COORD_ADDR": car.M.Addr()}
	cli(t, env, "", "service", "list", "web").want(t, 0, "")
	cli(t, env, "", "service", "pick", "web").want(t, ctl.ExitNotFound, "")
	car.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/web/instances/i1?ttl=60s", `{"address":"10.0.0.1","port":80,"payload":{"zone":"a"}}`)
	car.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/web/instances/i2?ttl=60s", `{"address":"10.0.0.2","port":80}`)
	r := cli(t, env, "", "service", "list", "web")
	r.want(t, 0, "*")
	if got := instanceLines(t, r.stdout); len(got) != 2 || got[0].ID != "i1" || got[0].Address != "10.0.0.1" || got[0].Port != 80 ||
		got[0].Payload["zone"] != "a" || got[1].ID != "i2" {
		t.Fatalf("list wrote %q", r.stdout)
	}
	pick := func() string {
		t.Helper()
		r := cli(t, env, "", "service", "pick", "--strategy", "round-robin", "web")
		r.want(t, 0, "*")
		got := instanceLines(t, r.stdout)
		if len(got) != 1 {
			t.Fatalf("pick wrote %q", r.stdout)
		}
		return got[0].ID
	}
	// Picks answer as the sidecar's follower of the service last read it (the
	// pick before the registrations opened it): once it has both, turns alternate.
	testutil.Eventually(t, 10*time.Second, "round-robin picks take turns", func() bool {
		first := pick()
		return pick() != first
	})
	turns := []string{pick(), pick(), pick(), pick()}
	if turns[0] == turns[1] || turns[0] != turns[2] || turns[1] != turns[3] {
		t.Fatalf("round-robin picked %v", turns)
	}
	r = cli(t, env, "", "service", "pick", "web")
	r.want(t, 0, "*")
	if got := instanceLines(t, r.stdout); len(got) != 1 || (got[0].ID != "i1" && got[0].ID != "i2") {
		t.Fatalf("random pick wrote %q", r.stdout)
	}
	cli(t, env, "", "service", "pick", "--strategy", "nearest", "web").want(t, ctl.ExitUsage, "")
	cli(t, env, "", "service", "list", "bad name!").want(t, ctl.ExitUsage, "")
	checkServiceHelp(t, env)
}

// cliInstance is an instance as service list and pick write it.
type cliInstance struct {
	ID, Address string
	Port        int
	Payload     map[string]string
}

// instanceLines reads what service list or pick wrote: lines of JSON.
func instanceLines(t *testing.T, out string) []cliInstance {
	t.Helper()
	var got []cliInstance
	for _, line := range strings.SplitAfter(out, "\n") {
		if line == "" {
			continue
		}
		var in cliInstance
		if !strings.HasSuffix(line, "}\n") || json.Unmarshal([]byte(line), &in) != nil {
			t.Fatalf("not a line of JSON: %q in %q", line, out)
		}
		got = append(got, in)
	}
	return got
}

// checkServiceHelp: service --help lists the group's three verbs, and
// service register --help describes the wrapper and its flags.
func checkServiceHelp(t *testing.T, env map[string]string) {
	t.Helper()
	r := cli(t, env, "", "service", "--help")
	for _, want := range []string{"coord-sidecar service list [flags] SERVICE", "coord-sidecar service pick [flags] SERVICE",
		"coord-sidecar service register [flags] SERVICE --id ID --address A"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("service --help: exit %d, stdout %q; want %q", r.code, r.stdout, want)
		}
	}
	if r := cli(t, env, "", "service", "register", "--help"); r.code != 0 || !strings.Contains(r.stdout, "Registers the instance ID of SERVICE") || !strings.Contains(r.stdout, "-address") {
		t.Fatalf("service register --help: exit %d, stdout %q", r.code, r.stdout)
	}
}

// status writes the session as JSON and exits 0 while connected; the token
// comes from COORD_TOKEN or COORD_TOKEN_FILE (without it: 401, exit 77).
func TestCLIStatusAndToken(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), "--token", "s3cret")
	env := map[string]string{"COORD_ADDR": "http://" + car.M.Addr()}
	cli(t, env, "", "status").want(t, ctl.ExitDenied, "")
	env["COORD_TOKEN"] = "s3cret"
	r := cli(t, env, "", "status")
	r.want(t, 0, "*")
	var s map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || s["state"] != "connected" {
		t.Fatalf("status wrote %q (%v)", r.stdout, err)
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"COORD_ADDR": car.M.Addr(), "COORD_TOKEN_FILE": file}
	cli(t, env, "", "kv", "put", "k", "v").want(t, 0, "")
	cli(t, env, "", "kv", "get", "k").want(t, 0, "v")
}

// The lock wrapper says why a command line is refused (the command must follow
// --) and, when it gives up, who holds the lock.
func TestLockWrapperMessages(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), steadySession...)
	getenv := func(k string) string {
		if k == "COORD_ADDR" {
			return car.M.Addr()
		}
		return ""
	}
	var out, errb bytes.Buffer
	if code := ctl.RunLock(sidecartest.QuietSignals(t), []string{"demo-x", "echo", "hi"}, getenv, &out, &errb); code != ctl.ExitUsage {
		t.Fatalf("without --: exit %d", code)
	}
	if !strings.Contains(errb.String(), "the command must follow --") {
		t.Fatalf("without --: stderr %q gives no reason", errb.String())
	}
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/demo-x?owner=alice")
	errb.Reset()
	if code := ctl.RunLock(sidecartest.QuietSignals(t), []string{"demo-x", "--wait", "200ms", "--", "true"}, getenv, &out, &errb); code != ctl.ExitNotAcquired {
		t.Fatalf("held: exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(errb.String(), "held by alice") || !strings.Contains(errb.String(), "fencing token") {
		t.Fatalf("gave up: stderr %q does not name the holder", errb.String())
	}
}

// The binary dispatches the verbs: stdin, stdout, stderr and exit codes of a
// real process.
func TestCLIBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := sidecartest.BuildBinary(t)
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		cmd := wrapper(bin, car.M.Addr(), args...)
		cmd.Stdin = strings.NewReader(stdin)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	if out, errs, code := run("a\nb", "kv", "put", "k"); code != 0 || out != "" {
		t.Fatalf("kv put: exit %d, %q, %q", code, out, errs)
	}
	if out, errs, code := run("", "kv", "get", "k"); code != 0 || out != "a\nb" {
		t.Fatalf("kv get: exit %d, %q, %q", code, out, errs)
	}
	if out, errs, code := run("", "kv", "get", "missing"); code != ctl.ExitNotFound || out != "" || !strings.HasPrefix(errs, "coord-sidecar kv get: ") {
		t.Fatalf("kv get missing: exit %d, %q, %q", code, out, errs)
	}
	if _, errs, code := run("", "lock", "demo-x", "echo", "hi"); code != ctl.ExitUsage || !strings.Contains(errs, "the command must follow --") {
		t.Fatalf("lock without --: exit %d, %q", code, errs)
	}
	if _, errs, code := run("", "service", "register", "web", "--address", "h", "--", "true"); code != ctl.ExitUsage || !strings.Contains(errs, "--id is required") {
		t.Fatalf("service register without --id: exit %d, %q", code, errs)
	}
	if out, errs, code := run("", "service", "register", "web", "--id", "b1", "--address", "h", "--", "sh", "-c", `printf %s "$COORD_LEASE"`); code != 0 || out == "" {
		t.Fatalf("service register: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}
