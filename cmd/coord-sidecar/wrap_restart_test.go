//go:build linux

package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The project's own clients ride through restarts of their sidecar: the lock
// and elect wrappers, `kv watch` and the example programs, against a sidecar
// on a --state-dir that is killed with SIGKILL and started again, then
// upgraded in place (SIGUSR2).

// riderChild is a wrapper's command that records its runs in log (recorder)
// and writes "PID LEASE" (its shell's pid and COORD_LEASE) to info, then
// sleeps until stopped.
func riderChild(log, who, info string) []string {
	return recorder(log, who, fmt.Sprintf(`echo "$$ $COORD_LEASE" > %s; sleep 600`, info))
}

// childInfo is what a riderChild wrote: its pid and its wrapper's lease.
type childInfo struct {
	pid   int
	lease string
}

// awaitChild waits for a riderChild to write info, and kills its process
// group at the end of the test (its sleep, should the test fail).
func awaitChild(t *testing.T, info string) childInfo {
	t.Helper()
	var c childInfo
	testutil.Eventually(t, 30*time.Second, "the command started: "+info, func() bool {
		b, err := os.ReadFile(info)
		f := strings.Fields(string(b))
		if err != nil || len(f) != 2 {
			return false
		}
		c.pid, err = strconv.Atoi(f[0])
		c.lease = f[1]
		return err == nil
	})
	t.Cleanup(func() { _ = syscall.Kill(-c.pid, syscall.SIGKILL) })
	return c
}

// gone says whether the process pid has ended: no such process, or a zombie
// nobody has waited for yet (its parent died; init reaps it when it does).
func gone(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return true
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// pid (comm) STATE ...: comm may hold spaces and parentheses.
	s := string(stat)
	rest := s[strings.LastIndexByte(s, ')')+1:]
	f := strings.Fields(rest)
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// spansOf are the runs of log whose name starts with prefix.
func spansOf(t *testing.T, log, prefix string) []span {
	t.Helper()
	var out []span
	for _, s := range spans(t, log) {
		if strings.HasPrefix(s.who, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// runsOnly fails unless exactly one run of prefix's is recorded, want, still
// running, with its process alive.
func runsOnly(t *testing.T, log, prefix, want string, c childInfo) {
	t.Helper()
	ss := spansOf(t, log, prefix)
	if len(ss) != 1 || ss[0].who != want || ss[0].end >= 0 || gone(c.pid) {
		t.Fatalf("runs of %s: %+v (pid %d gone: %v); want %s alone, still running", prefix, ss, c.pid, gone(c.pid), want)
	}
}

// startRider is startWrapper for a wrapper whose command's sidecartest.Children may
// outlive it (a test that fails midway): its end is not waited for past
// WaitDelay on their account.
func startRider(t *testing.T, bin, addr string, args ...string) *runningWrapper {
	t.Helper()
	w := &runningWrapper{cmd: wrapper(bin, addr, args...), exited: make(chan error, 1), out: &sidecartest.SyncBuffer{}}
	w.cmd.Stdout, w.cmd.Stderr = w.out, w.out
	w.cmd.WaitDelay = 5 * time.Second
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

// stillRunning fails if the wrapper has exited.
func (w *runningWrapper) stillRunning(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-w.exited:
		w.exited <- err
		t.Fatalf("%s exited (%v); it printed:\n%s", what, err, w.out.String())
	default:
	}
}

// reached waits until the lease's holder has reached the sidecar a: its
// expiry is later than mark + ttl, which neither the expiry that a
// predecessor wrote down before mark nor a successor's resume gives it.
func reached(t *testing.T, a *sidecartest.Sidecar, lease string, mark time.Time, ttl time.Duration) {
	t.Helper()
	var last string
	defer func() {
		if t.Failed() {
			t.Logf("the lease %s, last read: %s", lease, last)
		}
	}()
	testutil.Eventually(t, 30*time.Second, "the lease "+lease+" kept alive through the successor", func() bool {
		r, err := a.Do(t.Context(), http.MethodGet, "/v1/leases/"+lease, nil)
		if err != nil {
			last = err.Error()
			return false
		}
		last = fmt.Sprintf("%d %s", r.Status, r.Raw)
		at, err := time.Parse(time.RFC3339Nano, sidecartest.Str(r.Body["expiresAt"]))
		return r.Status == http.StatusOK && err == nil && at.After(mark.Add(ttl))
	})
}

// upgrade sends r's process SIGUSR2, waits for it to exit, and returns its
// successor once ready (killed at the end of the test, by the pid it wrote).
func (r *restartable) upgrade(t *testing.T) *sidecartest.Sidecar {
	t.Helper()
	old := r.cmd.Process.Pid
	r.upgradeAndAwaitExit(t)
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the old process exited %d after SIGUSR2, want 0; its log:\n%s", code, r.logs(t))
	}
	pid, err := statedir.ReadPID(r.state)
	if err != nil || pid == old {
		t.Fatalf("after SIGUSR2 the pid file names %d (%v); want the successor", pid, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	s := &sidecartest.Sidecar{Base: "http://" + r.addr}
	s.WaitReady(t)
	return s
}

// lockHolder is the fencing token of the lock's holder as c sees it (0: none).
func lockHolder(t *testing.T, c *sidecartest.Sidecar, name string) int64 {
	t.Helper()
	h, _ := c.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+name).Body["holder"].(map[string]any)
	return sidecartest.Num(h["fencingToken"])
}

// The lock and elect wrappers keep their lease, their grant and their command
// through a restart of their sidecar with SIGKILL (a successor started on the
// same --state-dir) and through an upgrade (SIGUSR2): the command runs on,
// the same process, with the same lease and fencing token, and the wrappers
// waiting on another sidecar are not granted meanwhile; once the wrappers end,
// those are, never overlapping. `kv watch` prints a change made after the
// restarts (and nothing for the restarts themselves), and the example
// programs (bash, Python, Node) carry on: the lock holders keep their lock and
// command, the election followers their candidacy, the throughput sharers
// their membership.
func TestClientsRideThroughRestarts(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	r := newRestartable(t, zkc.Servers(), root, "10s")
	a := r.start(t)
	// The other candidates' sidecar, never restarted; its session timeout as
	// a's, so that a busy machine does not put its session in doubt (its
	// holds would then be reported lost and taken again, rightly, but not
	// what is checked here).
	b := sidecartest.Start(t, zkc.Servers(), root, "--session-timeout", "10s")
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")
	const ttl = 15 * time.Second // the wrappers' default --ttl

	lockA := startRider(t, bin, r.addr, append([]string{"lock", "rider", "--grace", "2s", "--"}, riderChild(log, "lock-a", filepath.Join(dir, "lock-a"))...)...)
	lockChild := awaitChild(t, filepath.Join(dir, "lock-a"))
	token := lockHolder(t, b, "rider")
	lockB := startRider(t, bin, b.Base, append([]string{"lock", "rider", "--wait", "5m", "--"}, riderChild(log, "lock-b", filepath.Join(dir, "lock-b"))...)...)
	testutil.Eventually(t, 10*time.Second, "the other lock wrapper waits", func() bool {
		return sidecartest.Num(b.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/rider").Body["waiters"]) == 1
	})

	electA := startRider(t, bin, r.addr, append([]string{"elect", "rider", "--id", "elect-a", "--grace", "2s", "--"}, riderChild(log, "elect-a", filepath.Join(dir, "elect-a"))...)...)
	electChild := awaitChild(t, filepath.Join(dir, "elect-a"))
	electB := startRider(t, bin, b.Base, append([]string{"elect", "rider", "--id", "elect-b", "--"}, riderChild(log, "elect-b", filepath.Join(dir, "elect-b"))...)...)
	testutil.Eventually(t, 10*time.Second, "the other candidate enrolled", func() bool {
		return slices.Equal(candidates(t, b, "rider"), []string{"elect-a", "elect-b"})
	})

	put := func(value string) {
		t.Helper()
		resp, err := b.Do(t.Context(), http.MethodPut, "/v1/kv/rider", strings.NewReader(value))
		if err != nil || resp.Status != http.StatusOK {
			t.Fatalf("PUT /v1/kv/rider: %v %+v", err, resp)
		}
	}
	put("v1")
	watch := startExample(t, a, 5*time.Minute, nil, bin, "kv", "watch", "rider")
	watch.expect(t, "v1", 30*time.Second)
	prefixWatch := startExample(t, a, 5*time.Minute, nil, bin, "kv", "watch", "--prefix", "ride")
	prefixWatch.expect(t, "rider", 30*time.Second)
	prefixWatch.expect(t, "v1", 30*time.Second)

	examples := startExampleRiders(t, a, b, dir)

	check := func(after string, mark time.Time) {
		t.Helper()
		t.Logf("%s: checking the clients", after)
		reached(t, a, lockChild.lease, mark, ttl)
		reached(t, a, electChild.lease, mark, ttl)
		runsOnly(t, log, "lock-", "lock-a", lockChild)
		runsOnly(t, log, "elect-", "elect-a", electChild)
		if got := lockHolder(t, b, "rider"); got != token {
			t.Fatalf("%s the lock's holder has token %d, want %d", after, got, token)
		}
		if got := candidates(t, b, "rider"); !slices.Equal(got, []string{"elect-a", "elect-b"}) {
			t.Fatalf("%s the candidates are %q, want elect-a leading, elect-b behind", after, got)
		}
		examples.check(t, b, after)
		for w, what := range map[*runningWrapper]string{lockA: "lock wrapper a", lockB: "lock wrapper b", electA: "elect wrapper a", electB: "elect wrapper b"} {
			w.stillRunning(t, what+" "+after)
		}
	}

	// What a sidecar granted within its saving interval before a SIGKILL may
	// be lost (README, "Restarts and upgrades"): the test kills it once every
	// hold is written down.
	defer func() {
		if t.Failed() {
			t.Logf("the state file: %s", r.savedState(t))
		}
	}()
	testutil.Eventually(t, 10*time.Second, "every hold saved", func() bool {
		st := r.savedState(t)
		for _, hold := range append([]string{`"kind":"lock","name":"rider"`, `"kind":"candidate","name":"rider/elect-a"`}, examples.saved()...) {
			if !strings.Contains(st, hold) {
				return false
			}
		}
		return true
	})
	r.kill(t)
	mark := time.Now()
	a = r.start(t)
	check("after SIGKILL and a successor", mark)

	mark = time.Now()
	a = r.upgrade(t)
	check("after SIGUSR2", mark)

	put("v2")
	watch.expect(t, "v2", 30*time.Second)
	prefixWatch.expect(t, "rider", 30*time.Second) // not v1 again: nothing for the restarts
	prefixWatch.expect(t, "v2", 30*time.Second)
	examples.afterRestarts(t, b)

	// The wrappers on the restarted sidecar end: the others take over.
	lockA.signal(t, syscall.SIGTERM, 143, 30*time.Second)
	electA.signal(t, syscall.SIGTERM, 143, 30*time.Second)
	awaitChild(t, filepath.Join(dir, "lock-b"))
	awaitChild(t, filepath.Join(dir, "elect-b"))
	checkNoOverlap(t, spansOf(t, log, "lock-"))
	checkNoOverlap(t, spansOf(t, log, "elect-"))
	if got := lockHolder(t, b, "rider"); got <= token {
		t.Fatalf("after lock wrapper a ended the lock's token is %d, want above %d", got, token)
	}
	select {
	case <-watch.done:
		t.Fatalf("kv watch exited (%v)", watch.err)
	case <-prefixWatch.done:
		t.Fatalf("kv watch --prefix exited (%v)", prefixWatch.err)
	default:
	}
}

// exampleRiders are the example programs that keep a lease, each on the
// restarted sidecar with a lock, an election or a throughput group of its own:
// the lock holders run a command until the test says stop; the followers
// wait behind a candidate t1 of the test's (on the sidecar that is not
// restarted), the sharers alone in their group.
type exampleRiders struct {
	stop      string // the lock holders' command ends once this file exists
	lockers   map[string]*exampleRun
	tokens    map[string]int64
	followers map[string]*exampleRun
	t1        map[string]*sidecartest.Response
	terms     map[string]string
	sharers   map[string]*exampleRun
}

func startExampleRiders(t *testing.T, a, b *sidecartest.Sidecar, dir string) *exampleRiders {
	t.Helper()
	x := &exampleRiders{stop: filepath.Join(dir, "stop"),
		lockers: map[string]*exampleRun{}, tokens: map[string]int64{},
		followers: map[string]*exampleRun{}, t1: map[string]*sidecartest.Response{}, terms: map[string]string{},
		sharers: map[string]*exampleRun{}}
	for _, l := range exampleLangs {
		l.need(t)
		lock := l.argv(l.lock, "rider-lock-"+l.name, "sh", "-c", fmt.Sprintf("while [ ! -e %s ]; do sleep 0.1; done", x.stop))
		x.lockers[l.name] = startExample(t, a, 5*time.Minute, map[string]string{"TTL": "30"}, lock...)
		x.tokens[l.name] = exampleAtoi(t, x.lockers[l.name].expect(t, `token ([0-9]+)`, 30*time.Second)[1])

		election := "rider-" + l.name
		x.t1[l.name] = sidecartest.Campaign(t, b, election, "t1", "ttl=60s")
		x.terms[l.name] = fmt.Sprint(sidecartest.Num(x.t1[l.name].Body["term"]))
		run := startExample(t, a, 5*time.Minute, map[string]string{"EVENTS": "2", "TTL": "60", "VALUE": "rider"},
			l.argv(l.election, election, "ex")...)
		run.expect(t, "enrolled ex leader false term "+x.terms[l.name], 30*time.Second)
		run.expect(t, "leader t1 term "+x.terms[l.name], 30*time.Second)
		x.followers[l.name] = run

		b.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/rider-tp-"+l.name, `{"limit":1000}`)
		run = startExample(t, a, 5*time.Minute, map[string]string{"EVENTS": "2", "TTL": "60"},
			l.argv(l.throughput, "rider-tp-"+l.name, "ex")...)
		run.expect(t, "joined ex", 30*time.Second)
		run.expect(t, `share 1000 version [0-9]+`, 30*time.Second)
		x.sharers[l.name] = run
	}
	return x
}

// saved are what the state file of their sidecar says of their holds.
func (x *exampleRiders) saved() []string {
	var out []string
	for _, l := range exampleLangs {
		out = append(out, fmt.Sprintf(`"kind":"lock","name":"rider-lock-%s"`, l.name),
			fmt.Sprintf(`"kind":"candidate","name":"rider-%s/ex"`, l.name), "rider-tp-"+l.name+"/")
	}
	return out
}

// check fails unless every lock holder still holds its lock with its token,
// as the sidecar that was not restarted sees it, and still runs.
func (x *exampleRiders) check(t *testing.T, b *sidecartest.Sidecar, after string) {
	t.Helper()
	for name, run := range x.lockers {
		if got := lockHolder(t, b, "rider-lock-"+name); got != x.tokens[name] {
			t.Fatalf("%s the %s lock example's lock has token %d, want %d", after, name, got, x.tokens[name])
		}
		select {
		case <-run.done:
			t.Fatalf("%s the %s lock example exited (%v)", after, name, run.err)
		default:
		}
	}
}

// afterRestarts ends the lock holders' commands (each releases and exits 0),
// has t1 resign (each follower, its candidacy kept, prints itself leading, and
// nothing before: the restarts changed no leader) and another member join
// each group (each sharer prints half the limit); the followers and sharers
// then exit 0 (EVENTS=2).
func (x *exampleRiders) afterRestarts(t *testing.T, b *sidecartest.Sidecar) {
	t.Helper()
	if err := os.WriteFile(x.stop, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, run := range x.lockers {
		run.expect(t, "released", 30*time.Second)
		run.exit(t, 0, 30*time.Second)
		if got := lockHolder(t, b, "rider-lock-"+name); got != 0 {
			t.Fatalf("the %s lock example exited, its lock still held (token %d)", name, got)
		}
	}
	for name, run := range x.followers {
		election := "rider-" + name
		b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/"+election+"/candidates/t1?lease="+sidecartest.Str(x.t1[name].Body["lease"]))
		term := run.expect(t, `leader ex term ([0-9]+)`, 30*time.Second)[1]
		if exampleAtoi(t, term) <= exampleAtoi(t, x.terms[name]) {
			t.Fatalf("%s: term %s after %s", name, term, x.terms[name])
		}
		run.exit(t, 0, 30*time.Second)
	}
	for name, run := range x.sharers {
		sidecartest.JoinTP(t, b, "rider-tp-"+name, "t1", "weight=1")
		run.expect(t, `share 500 version [0-9]+`, 30*time.Second)
		run.exit(t, 0, 30*time.Second)
	}
}

// A wrapper killed with SIGKILL takes its command with it (on Linux, the
// kernel's parent-death signal): the command is gone, and the candidate next
// in line, whose command checks on start that the first one's has ended,
// runs only after it. The same for the lock wrapper.
func TestWrapperKilledTakesItsCommand(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	for _, kind := range []string{"lock", "elect"} {
		t.Run(kind, func(t *testing.T) {
			dir := t.TempDir()
			log := filepath.Join(dir, "runs.log")
			args := func(who string) []string {
				if kind == "lock" {
					return []string{"lock", "killed", "--wait", "2m", "--"}
				}
				return []string{"elect", "killed", "--id", who, "--"}
			}
			// The first one's command starts a process of its own (in its
			// process group), which must end with the wrapper too.
			spawned := filepath.Join(dir, "spawned")
			first := startRider(t, bin, car.Base, append(args("first"), recorder(log, "first",
				fmt.Sprintf(`sleep 600 & echo $! > %s; echo "$$ $COORD_LEASE" > %s; sleep 600`, spawned, filepath.Join(dir, "first")))...)...)
			child := awaitChild(t, filepath.Join(dir, "first"))
			var grandchild int
			testutil.Eventually(t, 10*time.Second, "the command's own process started", func() bool {
				b, err := os.ReadFile(spawned)
				grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return err == nil && grandchild > 0
			})
			t.Cleanup(func() { _ = syscall.Kill(grandchild, syscall.SIGKILL) })
			// The next one's command writes whether the first one's still runs.
			verdict := filepath.Join(dir, "verdict")
			probe := fmt.Sprintf(`s=$(sed 's/.*) //' /proc/%[1]d/stat 2>/dev/null | cut -c1); if [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]; then echo alive > %[2]s; else echo gone > %[2]s; fi; echo "$$ $COORD_LEASE" > %[3]s; sleep 600`,
				child.pid, verdict, filepath.Join(dir, "next"))
			startRider(t, bin, car.Base, append(args("next"), "sh", "-c", probe)...)
			if kind == "lock" {
				testutil.Eventually(t, 10*time.Second, "the next wrapper waits", func() bool {
					return sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/killed").Body["waiters"]) == 1
				})
			} else {
				testutil.Eventually(t, 10*time.Second, "the next candidate enrolled", func() bool {
					return len(candidates(t, car, "killed")) == 2
				})
			}

			if err := first.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			testutil.Eventually(t, 10*time.Second, fmt.Sprintf("the killed wrapper's command (pid %d) and its own process (pid %d) gone", child.pid, grandchild), func() bool {
				return gone(child.pid) && gone(grandchild)
			})
			awaitChild(t, filepath.Join(dir, "next"))
			b, err := os.ReadFile(verdict)
			if err != nil || strings.TrimSpace(string(b)) != "gone" {
				t.Fatalf("when the next %s's command started, the killed wrapper's command was %q (%v); want gone", kind, b, err)
			}
		})
	}
}

// A sidecar that goes away for good (SIGKILL, nobody starting a successor) is
// not waited for past the point where the lease could have ended: the lock
// wrapper stops its command and exits 76, saying it had no word from the
// sidecar, before the lock (its session expired) passes to a wrapper waiting
// on another sidecar, whose command never overlaps.
func TestLockWrapperGivesUpASidecarGoneForGood(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	addr := sidecartest.FreeAddr(t)
	p := exec.Command(bin, "--listen", addr, "--zk", strings.Join(zkc.Servers(), ","), "--zk-root", root, "--session-timeout", "2s")
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = p.Wait(); close(exited) }()
	t.Cleanup(func() { _ = p.Process.Kill(); <-exited })
	(&sidecartest.Sidecar{Base: "http://" + addr}).WaitReady(t)
	other := sidecartest.Start(t, zkc.Servers(), root)
	dir := t.TempDir()
	log := filepath.Join(dir, "runs.log")

	gone := startRider(t, bin, "http://"+addr, append([]string{"lock", "stays-away", "--grace", "2s", "--"}, riderChild(log, "a", filepath.Join(dir, "a"))...)...)
	awaitChild(t, filepath.Join(dir, "a"))
	startRider(t, bin, other.Base, append([]string{"lock", "stays-away", "--wait", "2m", "--"}, riderChild(log, "b", filepath.Join(dir, "b"))...)...)
	testutil.Eventually(t, 10*time.Second, "the other wrapper waits", func() bool {
		return sidecartest.Num(other.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/stays-away").Body["waiters"]) == 1
	})

	killed := time.Now()
	if err := p.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	gone.wait(t, killed, ctl.ExitLeaseLost, testutil.Patience(30*time.Second))
	if out := gone.out.String(); !strings.Contains(out, "no word from the sidecar") {
		t.Fatalf("the wrapper printed %q; want it to say it had no word from the sidecar", out)
	}
	awaitChild(t, filepath.Join(dir, "b"))
	checkNoOverlap(t, spans(t, log))
}
