package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// wrapRun is a wrapper (ctl.Wrappers[name]) run in the test's process.
type wrapRun struct {
	code   chan int
	stderr *bytes.Buffer
}

func startHeld(t *testing.T, addr, name string, args ...string) *wrapRun {
	t.Helper()
	r := &wrapRun{code: make(chan int, 1), stderr: &bytes.Buffer{}}
	sig := sidecartest.QuietSignals(t)
	go func() {
		var out bytes.Buffer
		run := ctl.Wrappers[name]
		if name == "group join" {
			run = ctl.RunGroupJoin
		}
		r.code <- run(sig, args, func(k string) string {
			if k == "COORD_ADDR" {
				return addr
			}
			return ""
		}, &out, r.stderr)
	}()
	return r
}

func (r *wrapRun) exit(t *testing.T) int {
	t.Helper()
	select {
	case c := <-r.code:
		return c
	case <-time.After(testutil.Patience(60 * time.Second)):
		t.Fatal("the wrapper did not exit")
		return 0
	}
}

// runWrapper runs a wrapper to its end: its exit code and stderr.
func runWrapper(t *testing.T, addr, name string, args ...string) (int, string) {
	t.Helper()
	r := startHeld(t, addr, name, args...)
	code := r.exit(t)
	return code, r.stderr.String()
}

// maxConcurrent is the most spans that run at once.
func maxConcurrent(ss []span) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, s := range ss {
		edges = append(edges, edge{s.start, 1}, edge{s.end, -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if edges[i].at != edges[j].at {
			return edges[i].at < edges[j].at
		}
		return edges[i].delta < edges[j].delta // an end before a start at the same instant
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// waitFile waits for the file a child writes and returns its contents.
func waitFile(t *testing.T, path string) string {
	t.Helper()
	var b []byte
	testutil.Eventually(t, 20*time.Second, "the command writes "+filepath.Base(path), func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil && len(b) > 0
	})
	return strings.TrimSpace(string(b))
}

// semaphore NAME --max N: at most N commands at once, each with COORD_PERMIT;
// 75 when no permit comes within --wait (stderr names the holders), 65 for a
// --max not the semaphore's, 64 without --max, 76 (the command stopped) when
// the lease is lost, the command's own code otherwise.
func TestSemaphoreWrapper(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), steadySession...)
	addr := car.M.Addr()
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	var wg sync.WaitGroup
	codes := make(chan string, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			args := append([]string{"pool", "--max", "2", "--wait", "60s", "--"}, recorder(log, fmt.Sprintf("w%d", i), "sleep 0.3")...)
			if code, stderr := runWrapper(t, addr, "semaphore", args...); code != 0 {
				codes <- fmt.Sprintf("w%d: exit %d, %s", i, code, stderr)
			}
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		t.Fatal(c)
	}
	ss := spans(t, log)
	if len(ss) != 4 {
		t.Fatalf("%d runs, want 4: %+v", len(ss), ss)
	}
	if n := maxConcurrent(ss); n > 2 {
		t.Fatalf("%d commands ran at once under --max 2: %+v", n, ss)
	}
	if got := car.Must(t, http.StatusOK, http.MethodGet, "/v1/semaphores/pool"); strings.Contains(string(got.Raw), `"permit"`) {
		t.Fatalf("a permit left after the wrappers: %s", got.Raw)
	}

	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/one/permits?max=1&ttl=60s&owner=alice")
	if code, stderr := runWrapper(t, addr, "semaphore", "one", "--max", "1", "--wait", "200ms", "--", "true"); code != ctl.ExitNotAcquired || !strings.Contains(stderr, "alice") {
		t.Fatalf("full: exit %d, stderr %q", code, stderr)
	}
	if code, stderr := runWrapper(t, addr, "semaphore", "one", "--max", "3", "--wait", "200ms", "--", "true"); code != ctl.ExitConflict {
		t.Fatalf("--max 3 against 1: exit %d, stderr %q", code, stderr)
	}
	if code, stderr := runWrapper(t, addr, "semaphore", "one", "--", "true"); code != ctl.ExitUsage || !strings.Contains(stderr, "--max") {
		t.Fatalf("without --max: exit %d, stderr %q", code, stderr)
	}

	out := filepath.Join(dir, "env")
	r := startHeld(t, addr, "semaphore", "lost", "--max", "1", "--", "sh", "-c", `echo "$COORD_LEASE $COORD_PERMIT" > "$0"; sleep 60`, out)
	env := strings.Fields(waitFile(t, out))
	if len(env) != 2 {
		t.Fatalf("the command's COORD_LEASE and COORD_PERMIT: %q", env)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+env[0])
	if code := r.exit(t); code != ctl.ExitLeaseLost || !strings.Contains(r.stderr.String(), "it was stopped") {
		t.Fatalf("lease revoked: exit %d, stderr %q", code, r.stderr)
	}
	if code, stderr := runWrapper(t, addr, "semaphore", "lost", "--max", "1", "--", "sh", "-c", "exit 4"); code != 4 {
		t.Fatalf("the command's code: exit %d, stderr %q", code, stderr)
	}
	checkWrapperHelp(t, "semaphore", "-max", "-wait", "COORD_PERMIT")
}

// rwlock NAME --read|--write: readers share the lock, a writer waits for
// them (75 after --wait, stderr naming the readers), a reader for a writer;
// the writer's command gets COORD_FENCING_TOKEN; a lost lease stops the
// command (76); neither or both modes is a usage error.
func TestRWLockWrapper(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), steadySession...)
	addr := car.M.Addr()
	dir := t.TempDir()
	started, stop := filepath.Join(dir, "started"), filepath.Join(dir, "stop")
	reader := startHeld(t, addr, "rwlock", "rw", "--read", "--owner", "bob", "--", "sh", "-c",
		`echo "$COORD_LEASE" > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done`, started, stop)
	lease := waitFile(t, started)
	if code, stderr := runWrapper(t, addr, "rwlock", "rw", "--read", "--wait", "10s", "--", "true"); code != 0 {
		t.Fatalf("a second reader: exit %d, stderr %q", code, stderr)
	}
	if code, stderr := runWrapper(t, addr, "rwlock", "rw", "--write", "--wait", "200ms", "--", "true"); code != ctl.ExitNotAcquired || !strings.Contains(stderr, "bob") {
		t.Fatalf("a writer while bob reads: exit %d, stderr %q", code, stderr)
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := reader.exit(t); code != 0 {
		t.Fatalf("reader: exit %d, stderr %q", code, reader.stderr)
	}
	car.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+lease) // released, its lease revoked

	token := filepath.Join(dir, "token")
	if code, stderr := runWrapper(t, addr, "rwlock", "rw", "--write", "--", "sh", "-c", `echo "$COORD_FENCING_TOKEN" > "$0"`, token); code != 0 || waitFile(t, token) == "" {
		t.Fatalf("writer: exit %d, stderr %q", code, stderr)
	}
	held := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/rw?mode=write&ttl=60s&owner=carol")
	if code, stderr := runWrapper(t, addr, "rwlock", "rw", "--read", "--wait", "200ms", "--", "true"); code != ctl.ExitNotAcquired || !strings.Contains(stderr, "carol") {
		t.Fatalf("a reader while carol writes: exit %d, stderr %q", code, stderr)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+sidecartest.Str(held.Body["lease"]))

	out := filepath.Join(dir, "lease")
	r := startHeld(t, addr, "rwlock", "rw", "--write", "--", "sh", "-c", `echo "$COORD_LEASE" > "$0"; sleep 60`, out)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+waitFile(t, out))
	if code := r.exit(t); code != ctl.ExitLeaseLost {
		t.Fatalf("lease revoked: exit %d, stderr %q", code, r.stderr)
	}
	for _, flags := range [][]string{{}, {"--read", "--write"}} {
		if code, stderr := runWrapper(t, addr, "rwlock", append(append([]string{"rw"}, flags...), "--", "true")...); code != ctl.ExitUsage || !strings.Contains(stderr, "--read") {
			t.Fatalf("%q: exit %d, stderr %q", flags, code, stderr)
		}
	}
	checkWrapperHelp(t, "rwlock", "-write", "-wait", "COORD_FENCING_TOKEN")
}

// checkWrapperHelp: NAME --help describes the wrapper, its flags and the
// exit-code table (wants besides), on stdout, exit 0.
func checkWrapperHelp(t *testing.T, name string, wants ...string) {
	t.Helper()
	var out, errb bytes.Buffer
	run := ctl.Wrappers[name]
	if name == "group join" {
		run = ctl.RunGroupJoin
	}
	code := run(sidecartest.QuietSignals(t), []string{"--help"}, func(string) string { return "" }, &out, &errb)
	for _, want := range append(wants, "usage: coord-sidecar "+name+" NAME", "Exit codes", "-ttl", "-grace") {
		if code != 0 || !strings.Contains(out.String(), want) {
			t.Fatalf("%s --help: exit %d, stdout %q; want %q", name, code, out.String(), want)
		}
	}
}

// The binary dispatches the semaphore, rwlock and group join wrappers.
func TestHeldWrappersBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := sidecartest.BuildBinary(t)
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), steadySession...)
	for _, args := range [][]string{
		{"semaphore", "b", "--max", "1", "--", "sh", "-c", `printf %s "$COORD_PERMIT"; exit 5`},
		{"rwlock", "b", "--write", "--", "sh", "-c", `printf %s "$COORD_FENCING_TOKEN"; exit 5`},
		{"group", "join", "b", "--id", "x", "--", "sh", "-c", `printf %s "$COORD_LEASE"; exit 5`},
	} {
		cmd := wrapper(bin, car.M.Addr(), args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 || out.Len() == 0 {
			t.Fatalf("%q: %v, stdout %q, stderr %q; want exit 5 and the variable", args, err, out.String(), errb.String())
		}
	}
}

// group join NAME --id ID: ID is a member (with its --value, on the command's
// COORD_LEASE) exactly while the command runs; the wrapper exits with the
// command's code; an id a live member has is 65 with the command never
// started; a lost lease stops the command (76); no --id is 64.
func TestGroupJoinWrapper(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), steadySession...)
	addr := car.M.Addr()
	members := func() string { return string(car.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/g").Raw) }
	dir := t.TempDir()
	started, stop := filepath.Join(dir, "started"), filepath.Join(dir, "stop")
	r := startHeld(t, addr, "group join", "g", "--id", "m1", "--value", "hello", "--", "sh", "-c",
		`echo "$COORD_LEASE" > "$0"; while [ ! -e "$1" ]; do sleep 0.05; done; exit 3`, started, stop)
	lease := waitFile(t, started)
	if m := members(); !strings.Contains(m, `"m1"`) || !strings.Contains(m, "hello") {
		t.Fatalf("while the command runs: %s", m)
	}
	if l := string(car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease).Raw); !strings.Contains(l, `"name":"g/m1"`) {
		t.Fatalf("COORD_LEASE does not hold the member: %s", l)
	}
	never := filepath.Join(dir, "never")
	if code, stderr := runWrapper(t, addr, "group join", "g", "--id", "m1", "--", "touch", never); code != ctl.ExitConflict {
		t.Fatalf("an id in use: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(never); err == nil {
		t.Fatal("the command ran though the member was not joined")
	}
	if err := os.WriteFile(stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := r.exit(t); code != 3 {
		t.Fatalf("exit %d, want the command's 3; stderr %q", code, r.stderr)
	}
	if m := members(); strings.Contains(m, `"m1"`) {
		t.Fatalf("after the command exited: %s", m)
	}

	out := filepath.Join(dir, "lease")
	r = startHeld(t, addr, "group join", "g", "--id", "m2", "--", "sh", "-c", `echo "$COORD_LEASE" > "$0"; sleep 60`, out)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+waitFile(t, out))
	if code := r.exit(t); code != ctl.ExitLeaseLost {
		t.Fatalf("lease revoked: exit %d, stderr %q", code, r.stderr)
	}
	if code, stderr := runWrapper(t, addr, "group join", "g", "--", "true"); code != ctl.ExitUsage || !strings.Contains(stderr, "--id is required") {
		t.Fatalf("without --id: exit %d, stderr %q", code, stderr)
	}
	checkWrapperHelp(t, "group join", "-id", "-value")
	env := map[string]string{"COORD_ADDR": addr}
	if r := cli(t, env, "", "group", "--help"); r.code != 0 || !strings.Contains(r.stdout, "coord-sidecar group join [flags] NAME --id ID") {
		t.Fatalf("group --help: %d %q", r.code, r.stdout)
	}
}
