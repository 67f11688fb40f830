package main

import (
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

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// signalChild is a child that writes its pid to dir/pid, then sleeps; on SIGTERM
// or SIGINT it appends the signal's name to dir/signals, stops its sleep and
// exits. With ignore it ignores SIGTERM and SIGINT instead (only SIGKILL ends it).
func signalChild(dir string, ignore bool) []string {
	pid, got := filepath.Join(dir, "pid"), filepath.Join(dir, "signals")
	traps := fmt.Sprintf(`trap 'kill $! 2>/dev/null; echo TERM >> %[1]s; exit 143' TERM; trap 'kill $! 2>/dev/null; echo INT >> %[1]s; exit 130' INT`, got)
	if ignore {
		traps = `trap '' TERM INT`
	}
	return []string{"sh", "-c", fmt.Sprintf(`%s; echo $$ >> %s; sleep 60 & wait $!`, traps, pid)}
}

// childPIDs reads the pids the signal sidecartest.Children in dir wrote, one per run.
func childPIDs(t *testing.T, dir string) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "pid"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("pid file: %q", raw)
		}
		pids = append(pids, n)
	}
	return pids
}

// alive says whether the process pid still runs: a zombie has ended (a
// wrapped command's parent is the guard, which may die first, and then
// nobody here waits for it).
func alive(pid int) bool { return !gone(pid) }

// runningWrapper is a wrapper process under test.
type runningWrapper struct {
	cmd    *exec.Cmd
	exited chan error
	out    *sidecartest.SyncBuffer
}

func startWrapper(t *testing.T, bin, addr string, args ...string) *runningWrapper {
	t.Helper()
	w := &runningWrapper{cmd: wrapper(bin, addr, args...), exited: make(chan error, 1), out: &sidecartest.SyncBuffer{}}
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { w.exited <- w.cmd.Wait() }()
	t.Cleanup(func() {
		_ = w.cmd.Process.Kill()
		<-w.exited
		if t.Failed() {
			t.Logf("wrapper %q printed:\n%s", args, w.out.String())
		}
	})
	return w
}

// signal sends sig and waits for the wrapper to exit: it fails unless the exit
// comes within the deadline with code want.
func (w *runningWrapper) signal(t *testing.T, sig syscall.Signal, want int, within time.Duration) time.Duration {
	t.Helper()
	sent := time.Now()
	if err := w.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	return w.wait(t, sent, want, within)
}

func (w *runningWrapper) wait(t *testing.T, since time.Time, want int, within time.Duration) time.Duration {
	t.Helper()
	select {
	case err := <-w.exited:
		w.exited <- err // for Cleanup
		took := time.Since(since)
		if got := exampleExitCode(err); got != want {
			t.Fatalf("wrapper exited %d (%v) after %s, want %d", got, err, took, want)
		}
		return took
	case <-time.After(within):
		t.Fatalf("wrapper still runs %s after the signal", within)
	}
	return 0
}

// candidates returns the ids enrolled in an election, in line order.
func candidates(t testing.TB, c *sidecartest.Sidecar, election string) []string {
	var ids []string
	body := c.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/"+election).Body
	list, _ := body["candidates"].([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		ids = append(ids, sidecartest.Str(m["candidate"]))
	}
	return ids
}

// SIGTERM and SIGINT end `lock` and `elect` (with and without --requeue) while
// the command runs: the command gets the signal, the wrapper waits for it to
// exit, releases (the lock is free, the candidate gone, the moment the wrapper
// has exited) and exits 128+N, well before --grace would have killed the command.
func TestWrapperSignalWhileRunning(t *testing.T) {
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	for _, mode := range []string{"lock", "elect", "elect-requeue"} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			name := mode + "-" + map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGINT: "INT"}[sig]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := car
				dir := t.TempDir()
				args := []string{"lock", name, "--grace", "60s", "--"}
				switch mode {
				case "elect":
					args = []string{"elect", name, "--id", "me", "--grace", "60s", "--"}
				case "elect-requeue":
					args = []string{"elect", name, "--id", "me", "--requeue", "--grace", "60s", "--"}
				}
				w := startWrapper(t, bin, car.M.Addr(), append(args, signalChild(dir, false)...)...)
				testutil.Eventually(t, 10*time.Second, "the command runs", func() bool { return len(childPIDs(t, dir)) == 1 })
				pid := childPIDs(t, dir)[0]
				if mode == "lock" {
					if c.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+name).Body["holder"] == nil {
						t.Fatal("the command runs but the lock has no holder")
					}
				} else if ids := candidates(t, c, name); len(ids) != 1 || ids[0] != "me" {
					t.Fatalf("the command runs; candidates %q, want [me]", ids)
				}

				took := w.signal(t, sig, 128+int(sig), 20*time.Second)
				t.Logf("exited %s after the signal", took.Round(time.Millisecond))
				if alive(pid) {
					t.Fatalf("the command (pid %d) outlives the wrapper", pid)
				}
				want := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGINT: "INT"}[sig]
				if got, _ := os.ReadFile(filepath.Join(dir, "signals")); strings.TrimSpace(string(got)) != want {
					t.Fatalf("the command received %q, want exactly %s", got, want)
				}
				if pids := childPIDs(t, dir); len(pids) != 1 {
					t.Fatalf("the command ran %d times, want once (no new turn after the signal)", len(pids))
				}
				if mode == "lock" {
					st := c.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+name)
					if st.Body["holder"] != nil || sidecartest.Num(st.Body["waiters"]) != 0 {
						t.Fatalf("right after the wrapper exited: %s, want the lock free", st.Raw)
					}
				} else {
					r := c.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/"+name)
					if r.Body["leader"] != nil || len(candidates(t, c, name)) != 0 {
						t.Fatalf("right after the wrapper exited: %s, want no leader and no candidate", r.Raw)
					}
				}
			})
		}
	}
}

// A signal before the command runs (waiting for the lock, or for leadership)
// ends the wrapper at once with 128+N: it leaves the line of waiters or of
// candidates, and never starts the command.
func TestWrapperSignalWhileWaiting(t *testing.T) {
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	for _, mode := range []string{"lock", "elect", "elect-requeue"} {
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
			name := "waiting-" + mode + "-" + strconv.Itoa(int(sig))
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				c := car
				dir := t.TempDir()
				var args []string
				switch mode {
				case "lock":
					c.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/"+name+"?owner=test&ttl=60s")
					args = []string{"lock", name, "--wait", "5m", "--"}
				case "elect":
					sidecartest.Campaign(t, c, name, "first", "ttl=60s")
					args = []string{"elect", name, "--id", "me", "--"}
				case "elect-requeue":
					sidecartest.Campaign(t, c, name, "first", "ttl=60s")
					args = []string{"elect", name, "--id", "me", "--requeue", "--"}
				}
				w := startWrapper(t, bin, car.M.Addr(), append(args, signalChild(dir, false)...)...)
				if mode == "lock" {
					testutil.Eventually(t, 10*time.Second, "the wrapper waits", func() bool {
						return sidecartest.Num(c.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+name).Body["waiters"]) == 1
					})
				} else {
					testutil.Eventually(t, 10*time.Second, "the wrapper campaigns", func() bool { return len(candidates(t, c, name)) == 2 })
				}
				w.signal(t, sig, 128+int(sig), 10*time.Second)
				if pids := childPIDs(t, dir); len(pids) != 0 {
					t.Fatalf("the command ran (%v) though the signal came first", pids)
				}
				if mode == "lock" {
					st := c.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+name)
					holder, _ := st.Body["holder"].(map[string]any)
					if holder == nil || sidecartest.Str(holder["owner"]) != "test" || sidecartest.Num(st.Body["waiters"]) != 0 {
						t.Fatalf("right after the wrapper exited: %s, want the test's hold and no waiter", st.Raw)
					}
				} else if ids := candidates(t, c, name); len(ids) != 1 || ids[0] != "first" {
					t.Fatalf("right after the wrapper exited: candidates %q, want [first]", ids)
				}
			})
		}
	}
}

// A command that ignores the signal is killed after --grace; the wrapper then
// releases and exits 128+N all the same.
func TestWrapperSignalIgnoredKillsAfterGrace(t *testing.T) {
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	dir := t.TempDir()
	w := startWrapper(t, bin, car.M.Addr(), append([]string{"lock", "stubborn", "--grace", "500ms", "--"}, signalChild(dir, true)...)...)
	testutil.Eventually(t, 10*time.Second, "the command runs", func() bool { return len(childPIDs(t, dir)) == 1 })
	took := w.signal(t, syscall.SIGTERM, 143, 10*time.Second)
	if took < 500*time.Millisecond {
		t.Fatalf("exited %s after SIGTERM, before --grace 500ms", took)
	}
	if pid := childPIDs(t, dir)[0]; alive(pid) {
		t.Fatalf("the command (pid %d) outlives the wrapper", pid)
	}
	if st := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/stubborn"); st.Body["holder"] != nil {
		t.Fatalf("after the wrapper: %s, want the lock free", st.Raw)
	}
}

// Without a signal, --requeue takes turns: the command runs again at the next
// turn; `elect` alone runs it once, resigns and exits with its code.
func TestElectWrapperRequeueTakesTurns(t *testing.T) {
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs")
	w := startWrapper(t, bin, car.M.Addr(), "elect", "turns", "--id", "me", "--requeue", "--", "sh", "-c", "echo $COORD_TERM >> "+runs)
	testutil.Eventually(t, 10*time.Second, "three turns", func() bool {
		raw, _ := os.ReadFile(runs)
		return len(strings.Fields(string(raw))) >= 3
	})
	w.signal(t, syscall.SIGTERM, 143, 10*time.Second)
	if ids := candidates(t, car, "turns"); len(ids) != 0 {
		t.Fatalf("after SIGTERM: candidates %q, want none", ids)
	}

	once := startWrapper(t, bin, car.M.Addr(), "elect", "once", "--id", "me", "--", "sh", "-c", "exit 7")
	once.wait(t, time.Now(), 7, 10*time.Second)
	if ids := candidates(t, car, "once"); len(ids) != 0 {
		t.Fatalf("after the command: candidates %q, want none", ids)
	}
}

// --help (and -h, and `help`) lists the subcommands and exits 0; each
// subcommand's --help describes it and exits 0; a bad command line does not.
func TestHelp(t *testing.T) {
	bin := sidecartest.BuildBinary(t)
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--help"}, 0, []string{"coord-sidecar lock NAME", "coord-sidecar elect NAME", "-zk string", "COORD_ADDR"}},
		{[]string{"-h"}, 0, []string{"coord-sidecar lock NAME", "coord-sidecar elect NAME"}},
		{[]string{"help"}, 0, []string{"coord-sidecar lock NAME", "coord-sidecar elect NAME"}},
		{[]string{"lock", "--help"}, 0, []string{"usage: coord-sidecar lock NAME", "-wait duration", "128+N"}},
		{[]string{"elect", "-h"}, 0, []string{"usage: coord-sidecar elect NAME", "-requeue", "128+N"}},
		{[]string{"--no-such-flag"}, 2, nil},
		{[]string{"no-such-subcommand"}, 2, nil},
		{[]string{"lock"}, ctl.ExitUsage, nil},
		{[]string{"elect", "x", "--no-such-flag", "--", "true"}, ctl.ExitUsage, nil},
	} {
		cmd := exec.Command(bin, c.args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if got := exampleExitCode(err); got != c.code {
			t.Fatalf("%q: exit %d (%v), want %d; stderr %s", c.args, got, err, c.code, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stdout.String(), w) {
				t.Fatalf("%q printed on stdout:\n%s\nwant it to contain %q", c.args, stdout.String(), w)
			}
		}
		if c.code != 0 && (stdout.Len() != 0 || stderr.Len() == 0) {
			t.Fatalf("%q: stdout %q, stderr %q; want the complaint on stderr only", c.args, stdout.String(), stderr.String())
		}
	}
}
