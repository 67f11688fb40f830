package main

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// recorder is a shell child that appends "start <ns> <who> <token>" and
// "end <ns> <who>" lines to a log, running `body` in the background between them
// so that a SIGTERM is recorded too.
func recorder(log, who, body string) []string {
	end := fmt.Sprintf(`echo "end $(date +%%s%%N) %s" >> %s`, who, log)
	return []string{"sh", "-c", fmt.Sprintf(`echo "start $(date +%%s%%N) %s $COORD_FENCING_TOKEN$COORD_TERM" >> %s; trap '%s; exit 143' TERM; %s & wait $!; rc=$?; %s; exit $rc`,
		who, log, end, body, end)}
}

type span struct {
	who        string
	start, end int64
	token      string
}

// spans reads a recorder log; a start with no end is open until now.
func spans(t *testing.T, log string) []span {
	t.Helper()
	f, err := os.Open(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	open := map[string]*span{}
	var out []span
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 {
			continue
		}
		ns, _ := strconv.ParseInt(fields[1], 10, 64)
		who := fields[2]
		switch fields[0] {
		case "start":
			s := &span{who: who, start: ns, end: -1}
			if len(fields) > 3 {
				s.token = fields[3]
			}
			open[who] = s
		case "end":
			if s := open[who]; s != nil {
				s.end = ns
				out = append(out, *s)
				delete(open, who)
			}
		}
	}
	for _, s := range open {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// checkNoOverlap fails when two spans run at once.
func checkNoOverlap(t *testing.T, ss []span) {
	t.Helper()
	for i := 1; i < len(ss); i++ {
		prevEnd := ss[i-1].end
		if prevEnd < 0 || ss[i].start < prevEnd {
			t.Fatalf("children overlap: %+v and %+v", ss[i-1], ss[i])
		}
	}
}

// steadySession is the --session-timeout of the sidecars of the wrapper and
// example tests that never cut one from ZooKeeper. A session of the tests'
// usual 2 s can expire on a machine at a load of 15, ending every lease (the
// examples then say so and stop, as they must). A wrapper trusts a keepalive's answer
// for half the session timeout at most; the tests' usual 2 s leaves one
// second, which a keepalive answered late on a busy machine outlasts, and the
// wrapper then stops its command as it must when it cannot tell (the lease
// could have ended): a test of exclusion or exit codes would fail for it.
var steadySession = []string{"--session-timeout", "10s"}

func wrapper(bin, addr string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "COORD_ADDR="+addr)
	return cmd
}

// Two wrappers on one lock never run their sidecartest.Children at once; tokens increase.
func TestLockWrapperExcludes(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root, steadySession...), sidecartest.Start(t, zkc.Servers(), root, steadySession...)}
	log := filepath.Join(t.TempDir(), "runs.log")
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5 {
				rec := recorder(log, fmt.Sprintf("w%d-%d", w, i), "sleep 0.1")
				cmd := wrapper(bin, cars[w].M.Addr(), append([]string{"lock", "cron", "--wait", "60s", "--"}, rec...)...)
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("wrapper %d run %d: %v: %s", w, i, err, out)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ss := spans(t, log)
	if len(ss) != 10 {
		t.Fatalf("%d runs recorded, want 10", len(ss))
	}
	checkNoOverlap(t, ss)
	for i := 1; i < len(ss); i++ {
		a, _ := strconv.ParseInt(ss[i-1].token, 10, 64)
		b, _ := strconv.ParseInt(ss[i].token, 10, 64)
		if b <= a {
			t.Fatalf("COORD_FENCING_TOKEN %d after %d", b, a)
		}
	}
}

// The wrapper exits with the child's code, and 75 when not acquired in time.
func TestLockWrapperExitCodes(t *testing.T) {
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	err := wrapper(bin, car.M.Addr(), "lock", "codes", "--", "sh", "-c", "exit 3").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child exit 3: wrapper %v", err)
	}
	held := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/codes")
	err = wrapper(bin, car.M.Addr(), "lock", "codes", "--wait", "200ms", "--", "true").Run()
	if !errors.As(err, &ee) || ee.ExitCode() != ctl.ExitNotAcquired {
		t.Fatalf("not acquired: wrapper %v, want exit %d", err, ctl.ExitNotAcquired)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/codes?lease="+sidecartest.Str(held.Body["lease"]))
	if err := wrapper(bin, car.M.Addr(), "lock", "codes", "--", "true").Run(); err != nil {
		t.Fatalf("after release: %v", err)
	}
}

// A lock lost mid-run (the sidecar's connection to ZooKeeper cut until its
// session could have expired: the sidecar reports the lock lost, `lost-hold`)
// stops the child within a second of the report, and the wrapper exits 76.
func TestLockWrapperStopsChildOnLostLease(t *testing.T) {
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", "1s")
	dir := t.TempDir()
	log, leaseFile := filepath.Join(dir, "runs.log"), filepath.Join(dir, "lease")
	rec := recorder(log, "victim", "echo $COORD_LEASE > "+leaseFile+"; sleep 60")
	cmd := wrapper(bin, car.M.Addr(), append([]string{"lock", "doomed", "--grace", "5s", "--"}, rec...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var lease string
	testutil.Eventually(t, 10*time.Second, "the child starts", func() bool {
		b, _ := os.ReadFile(leaseFile)
		lease = strings.TrimSpace(string(b))
		return len(spans(t, log)) == 1 && lease != ""
	})
	leaseEvents := sidecartest.FollowEvents(t, car, "/v1/leases/"+lease+"/events")
	leaseEvents.AwaitEvent(t, 5*time.Second, "lease", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lease" })
	proxy.Cut()
	defer proxy.Restore()
	lost := leaseEvents.AwaitEvent(t, 20*time.Second, "lost-hold", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lost-hold" })
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != ctl.ExitLeaseLost {
			t.Fatalf("wrapper: %v, want exit %d", err, ctl.ExitLeaseLost)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wrapper did not stop")
	}
	ss := spans(t, log)
	if len(ss) != 1 || ss[0].end < 0 {
		t.Fatalf("child runs %+v", ss)
	}
	stoppedAfter := time.Unix(0, ss[0].end).Sub(lost.At)
	if stoppedAfter > time.Second {
		t.Fatalf("child stopped %s after the loss", stoppedAfter)
	}
	t.Logf("child stopped %s after the lock was reported lost", stoppedAfter.Round(time.Millisecond))
}

// The lock wrapper stops its child when the lock's node is deleted by hand, as
// on a lost lease, and names the lost lock.
func TestLockWrapperStopsTheChildOnALostHold(t *testing.T) {
	t.Parallel() // see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root, steadySession...)
	raw := sidecartest.ZkClient(t, zkc.Servers(), "")
	bin := sidecartest.BuildBinary(t)
	cmd := wrapper(bin, a.M.Addr(), "lock", "wrapped", "--", "sleep", "60")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var holder []string
	testutil.Eventually(t, 20*time.Second, "the wrapper holds the lock", func() bool {
		holder, _, _ = raw.Children(root + "/locks/wrapped")
		return len(holder) == 1
	})
	if err := raw.Delete(root+"/locks/wrapped/"+holder[0], -1); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(testutil.Patience(20 * time.Second)):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the wrapper did not stop its child; stderr: %s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != ctl.ExitLeaseLost || !strings.Contains(stderr.String(), `lock "wrapped" lost`) {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
}

func TestElectWrapperOneChildAtATime(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	var procs []*exec.Cmd
	var addrs []string
	for range 2 {
		addr := sidecartest.FreeAddr(t)
		p := exec.Command(bin, "--listen", addr, "--zk", zkc.Server(0), "--zk-root", root, "--session-timeout", "4s") // short for the kill below, and twice a wrapper's one-second trust of 2 s (steadySession)
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = p.Wait() }()
		t.Cleanup(func() { _ = p.Process.Kill() })
		(&sidecartest.Sidecar{Base: "http://" + addr}).WaitReady(t)
		procs, addrs = append(procs, p), append(addrs, addr)
	}
	log := filepath.Join(t.TempDir(), "runs.log")
	placement := []int{0, 1, 1} // candidate i talks to sidecar placement[i]
	for i, sc := range placement {
		rec := recorder(log, fmt.Sprintf("c%d", i), "sleep 60")
		w := wrapper(bin, addrs[sc], append([]string{"elect", "leader-job", "--id", fmt.Sprintf("c%d", i), "--grace", "2s", "--"}, rec...)...)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { _ = w.Wait() }()
		t.Cleanup(func() { _ = w.Process.Kill() })
		if i == 0 {
			testutil.Eventually(t, 10*time.Second, "c0 runs", func() bool { return len(spans(t, log)) == 1 })
		}
	}
	other := &sidecartest.Sidecar{Base: "http://" + addrs[1]}
	testutil.Eventually(t, 10*time.Second, "three candidates enrolled", func() bool {
		return len(other.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/leader-job").Body["candidates"].([]any)) == 3
	})
	check := runningCheck(t, log)
	check("c0")
	// Kill c0's sidecar: its wrapper stops c0; after the session expires the next
	// candidate in line runs.
	next := sidecartest.Str(other.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/leader-job").Body["candidates"].([]any)[1].(map[string]any)["candidate"])
	if err := procs[0].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 15*time.Second, "another child starts", func() bool { return len(spans(t, log)) == 2 })
	check(next)
}

// runningCheck returns a check that exactly one child runs now, named want, and that
// no two sidecartest.Children ever overlapped.
func runningCheck(t *testing.T, log string) func(want string) {
	return func(want string) {
		t.Helper()
		ss := spans(t, log)
		var running []string
		for _, s := range ss {
			if s.end < 0 {
				running = append(running, s.who)
			}
		}
		if len(running) != 1 || running[0] != want {
			t.Fatalf("running sidecartest.Children %v, want only %s (%+v)", running, want, ss)
		}
		checkNoOverlap(t, ss)
	}
}
