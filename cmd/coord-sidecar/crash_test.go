package main

// Crash consistency ("a 2xx is a promise"): an answer that grants, releases or
// revokes anything is in the state directory before it is sent, so that a
// SIGKILL at any instant after it leaves it to the successor; and a successor
// killed at any instant of its start, or one that cannot serve, leaves the
// session and every hold to the next one. These tests speak only HTTP to the
// sidecars (and kill their processes); the state directory is touched only to
// make its writes fail.

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// crashTimeout is the killed sidecar's session timeout: far longer than any
// restart here takes, so that a successor that does its part always resumes.
const crashTimeout = "10s"

// crashHold is a lock grant a client was told of (201): name held by lease
// with token.
type crashHold struct {
	lease, name string
	token       int64
}

// holdLoss is a told hold that a successor did not keep, and how.
type holdLoss struct {
	crashHold
	how string
}

// crashRig is a sidecar process on a state directory (r, to kill) and an
// in-process sidecar on the same root (other, never killed), which reads the
// locks as ZooKeeper has them and contends for them.
type crashRig struct {
	r     *restartable
	a     *sidecartest.Sidecar // r's address, whichever process serves it
	other *sidecartest.Sidecar
}

func newCrashRig(t *testing.T) *crashRig {
	t.Helper()
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	r := newRestartable(t, zkc.Servers(), root, crashTimeout)
	return &crashRig{r: r, a: r.start(t), other: sidecartest.Start(t, zkc.Servers(), root)}
}

// lease grants a lease on a.
//
// Its TTL is half an hour because nothing keeps it alive: a test of 300 holds
// over thirteen kills takes 15 s on a quiet machine and past a minute on a
// busy one, and a lease that ends by its TTL mid-test frees its locks as a
// crash that lost them would.
func (g *crashRig) lease(t testing.TB) string {
	t.Helper()
	return sidecartest.Str(g.a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30m").Body["lease"])
}

// holdLocks acquires each of names on lease (owner: the lease's id, so that
// the lock's holder names it), one after the other, and returns the grants.
func (g *crashRig) holdLocks(t testing.TB, lease string, names []string) []crashHold {
	t.Helper()
	var out []crashHold
	for _, n := range names {
		r := g.a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/"+n+"?owner="+lease+"&lease="+lease)
		out = append(out, crashHold{lease: lease, name: n, token: sidecartest.Num(r.Body["fencingToken"])})
	}
	return out
}

// awaitSaved waits until the state directory's files name every lease and
// lock of holds: what a state written after the answer (today's, within 20
// ms) needs before a kill that is not the test's subject; a state written
// before the answer has them at once. Only the names are looked for, in any
// file of the directory, whatever its format.
func (g *crashRig) awaitSaved(t testing.TB, holds []crashHold) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "the holds in the state directory", func() bool {
		st := stateText(t, g.r.state)
		for _, h := range holds {
			if !strings.Contains(st, h.lease) || !nameIn(st, h.name) {
				return false
			}
		}
		return true
	})
}

// stateText is the text of every file in the state directory dir.
func stateText(t testing.TB, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil && !os.IsNotExist(err) { // a temporary file renamed meanwhile
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

// nameIn reports whether name occurs in text as a whole name (not as a part of
// a longer one: many-1 is not in many-10).
func nameIn(text, name string) bool {
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !nameByte(text[start-1])) && (end == len(text) || !nameByte(text[end])) {
			return true
		}
		i = start + 1
	}
}

// nameByte reports whether c may be part of a name (openapi.yaml's Name).
func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// lockNames is n lock names with prefix.
func lockNames(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// checkKept checks each told hold on car (the lease lists it) and on observer
// (the lock's holder, as ZooKeeper has it, is the lease with the same token)
// and returns those not kept.
func checkKept(t testing.TB, car, observer *sidecartest.Sidecar, holds []crashHold) []holdLoss {
	t.Helper()
	leases := map[string]map[string]bool{} // nil: the lease answered 404
	var lost []holdLoss
	for _, h := range holds {
		held, seen := leases[h.lease]
		if !seen {
			held = readLease(t, car, h.lease)
			leases[h.lease] = held
		}
		if how := holdState(t, observer, h, held); how != "" {
			lost = append(lost, holdLoss{h, how})
		}
	}
	return lost
}

// readLease is the set of lock names lease holds on car, nil when the lease
// answers 404.
func readLease(t testing.TB, car *sidecartest.Sidecar, lease string) map[string]bool {
	t.Helper()
	r := answered(t, car, "/v1/leases/"+lease, http.StatusOK, http.StatusNotFound)
	if r.Status == http.StatusNotFound {
		return nil
	}
	held := map[string]bool{}
	holds, _ := r.Body["holds"].([]any)
	for _, h := range holds {
		if m, _ := h.(map[string]any); m["kind"] == "lock" {
			held[sidecartest.Str(m["name"])] = true
		}
	}
	return held
}

// answered GETs path on car until it answers one of want (a 503 while the
// session reconnects is asked again) and returns that answer.
func answered(t testing.TB, car *sidecartest.Sidecar, path string, want ...int) *sidecartest.Response {
	t.Helper()
	var r *sidecartest.Response
	testutil.Eventually(t, 10*time.Second, "GET "+path+" answered", func() bool {
		var err error
		r, err = car.FaultCall(time.Minute, http.MethodGet, path)
		switch {
		case err != nil:
			t.Fatal(err)
		case slices.Contains(want, r.Status):
			return true
		case r.Status != http.StatusServiceUnavailable:
			t.Fatalf("GET %s: %d %s; want %v", path, r.Status, r.Raw, want)
		}
		return false
	})
	return r
}

// holdState says how h is not kept ("" when it is), given its lease's held
// lock names (nil: the lease is gone) and the lock's holder on observer.
func holdState(t testing.TB, observer *sidecartest.Sidecar, h crashHold, held map[string]bool) string {
	t.Helper()
	st := answered(t, observer, "/v1/locks/"+h.name, http.StatusOK).Body
	holder, _ := st["holder"].(map[string]any)
	owner, token := sidecartest.Str(holder["owner"]), sidecartest.Num(holder["fencingToken"])
	switch {
	case holder == nil:
		return "free"
	case owner != h.lease && strings.HasPrefix(owner, "other"):
		return "held by the other sidecar"
	case owner != h.lease:
		return "held by another lease"
	case token != h.token:
		return "another fencing token"
	case held == nil:
		return "its lease is gone (404)"
	case !held[h.name]:
		return "not among its lease's holds"
	}
	return ""
}

// tally is losses counted by how, e.g. "3 free, 2 held by the other sidecar".
func tally(losses []holdLoss) string {
	n := map[string]int{}
	for _, l := range losses {
		n[l.how]++
	}
	var parts []string
	for how, c := range n {
		parts = append(parts, fmt.Sprintf("%d %s", c, how))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// awaitExit waits for r's process to end by itself and returns its exit code.
func awaitExit(t testing.TB, r *restartable) int {
	t.Helper()
	select {
	case <-r.exited:
	case <-time.After(testutil.Patience(30 * time.Second)):
		t.Fatalf("the process did not exit; its log:\n%s", r.logs(t))
	}
	return r.cmd.ProcessState.ExitCode()
}

// killAfter kills r's process d after now, unless it ends first; it reports
// whether it killed it.
func killAfter(t testing.TB, r *restartable, d time.Duration) bool {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		r.kill(t)
		return true
	case <-r.exited:
		return false
	}
}

// ---------------------------------------------------------------------------
// One test per failure of the issue.

// Grants answered 201 from six clients, one after another, and revokes
// answered 204 among them, then SIGKILL at once, while the grants go on (the
// kill follows the revokes' answers, and grants are answered up to it): after
// the successor, every lock answered 201 (read before the kill or after it) is
// held by its lease with its token (and not by the other sidecar, whose
// waiters queue on the same locks from the kill on), and every revoked lease
// stays 404. Five rounds.
func TestCrashAckedGrantSurvivesKill(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	g := newCrashRig(t)
	const rounds, leases = 5, 4
	var told, lost, revoked, back int
	for round := range rounds {
		// Leases to revoke in the batch, each holding a lock, saved before.
		var doomed []string
		var settled []crashHold
		for i := range leases {
			l := g.lease(t)
			doomed = append(doomed, l)
			settled = append(settled, g.holdLocks(t, l, []string{fmt.Sprintf("doomed-%d-%d", round, i)})...)
		}
		g.awaitSaved(t, settled)
		fresh := make([]string, leases)
		for i := range fresh {
			fresh[i] = g.lease(t)
		}
		stop := make(chan struct{})
		started, wait := g.storm(round, fresh, 24, stop)
		<-started
		revokes := g.revokeAll(t, doomed) // while the grants go on
		g.r.kill(t)
		close(stop)
		holds := wait()
		g.otherWaits(holds) // answered by the end of their wait, or by the other sidecar's close
		g.a = g.r.start(t)

		losses := checkKept(t, g.a, g.other, holds)
		var stillThere []string
		for _, l := range revokes {
			if readLease(t, g.a, l) != nil {
				stillThere = append(stillThere, l)
			}
		}
		told, lost, revoked, back = told+len(holds), lost+len(losses), revoked+len(revokes), back+len(stillThere)
		if len(losses) > 0 || len(stillThere) > 0 {
			t.Errorf("round %d: %d of %d locks granted (201) up to the SIGKILL not kept by the successor (%s); %d of %d leases revoked (204) just before it answer 200 again",
				round, len(losses), len(holds), tally(losses), len(stillThere), len(revokes))
		}
	}
	t.Logf("%d rounds: %d acknowledged grants, %d not kept; %d acknowledged revokes, %d came back", rounds, told, lost, revoked, back)
}

// storm grants locks (each of its own name) on the fresh leases from six
// goroutines, one request after another, until a request is not answered
// (the kill) or stop closes. started closes once it has n grants; wait
// returns every grant answered 201, read before the kill or after it (an
// answer sent before the kill is a promise all the same).
func (g *crashRig) storm(round int, fresh []string, n int64, stop <-chan struct{}) (started <-chan struct{}, wait func() []crashHold) {
	var mu sync.Mutex
	var holds []crashHold
	var granted atomic.Int64
	reached := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				l, name := fresh[(i+k)%len(fresh)], fmt.Sprintf("told-%d-%d-%d", round, i, k)
				r, err := g.a.FaultCall(time.Minute, http.MethodPost, "/v1/locks/"+name+"?owner="+l+"&lease="+l)
				if err != nil {
					return
				}
				if r.Status == http.StatusCreated {
					mu.Lock()
					holds = append(holds, crashHold{lease: l, name: name, token: sidecartest.Num(r.Body["fencingToken"])})
					mu.Unlock()
					if granted.Add(1) == n {
						close(reached)
					}
				}
			}
		})
	}
	return reached, func() []crashHold {
		wg.Wait()
		return holds
	}
}

// revokeAll revokes the leases all at once and returns those answered 204.
func (g *crashRig) revokeAll(t testing.TB, leases []string) []string {
	t.Helper()
	var mu sync.Mutex
	var revoked []string
	var wg sync.WaitGroup
	for _, l := range leases {
		wg.Go(func() {
			r, err := g.a.FaultCall(time.Minute, http.MethodDelete, "/v1/leases/"+l)
			if err == nil && r.Status == http.StatusNoContent {
				mu.Lock()
				revoked = append(revoked, l)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(revoked) != len(leases) {
		t.Fatalf("%d of %d revokes answered 204", len(revoked), len(leases))
	}
	return revoked
}

// otherWaits has the other sidecar wait (up to 20 s) for each of holds'
// locks: a lock the successor lets go of is granted to it.
func (g *crashRig) otherWaits(holds []crashHold) {
	for i, h := range holds {
		callAsync(g.other, time.Minute, http.MethodPost, fmt.Sprintf("/v1/locks/%s?wait=20s&ttl=30s&owner=other-%d", h.name, i))
	}
}

// 300 holds; the successor is killed 50 ms to 350 ms after its exec (a delay
// per round, every 25 ms: today's successor writes a state without the holds
// from about 0.1 s, once its session is back, until its reconcile ends, at
// about 0.2 s to 0.3 s), then another successor starts: every hold is still
// there, with its token.
func TestCrashSuccessorKilledDuringStartKeepsState(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	g := newCrashRig(t)
	lease := g.lease(t)
	holds := g.holdLocks(t, lease, lockNames("many", 300))
	var failed []string
	for d := 50 * time.Millisecond; d <= 350*time.Millisecond; d += 25 * time.Millisecond {
		g.awaitSaved(t, holds)
		g.r.kill(t)
		g.r.spawn(t, g.r.args)
		killAfter(t, g.r, d)
		g.a = g.r.start(t)
		if losses := checkKept(t, g.a, g.other, holds); len(losses) > 0 {
			failed = append(failed, fmt.Sprintf("killed %s into its start: %d of %d holds lost (%s)", d, len(losses), len(holds), tally(losses)))
			// Start again with 300 holds for the next delay.
			if readLease(t, g.a, lease) != nil {
				g.a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
			}
			lease = g.lease(t)
			holds = g.holdLocks(t, lease, lockNames(fmt.Sprintf("many%d", d/time.Millisecond), 300))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("a successor killed during its start lost what its predecessor held:\n%s", strings.Join(failed, "\n"))
	}
}

// A successor that cannot serve (its port taken; its --listen a socket in a
// directory that does not exist) exits non-zero without closing the session:
// a proper successor then resumes every hold with its token, and the other
// sidecar's waiter is never granted.
func TestCrashSuccessorThatCannotListenKeepsSession(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	g := newCrashRig(t)
	var failed []string
	for _, c := range []struct {
		name string
		// block returns the failing successor's arguments and what undoes
		// the fault for the proper one.
		block func() ([]string, func())
	}{
		{"port taken", func() ([]string, func()) {
			ln, err := net.Listen("tcp", g.r.addr)
			if err != nil {
				t.Fatal(err)
			}
			return g.r.args, func() { _ = ln.Close() }
		}},
		{"unix socket in a missing directory", func() ([]string, func()) {
			args := slices.Clone(g.r.args)
			args[1] = "unix:/nonexistent/dir/sock" // --listen's value
			return args, func() {}
		}},
	} {
		lease := g.lease(t)
		holds := g.holdLocks(t, lease, lockNames("listen-"+strings.ReplaceAll(c.name, " ", "-"), 20))
		waiter := callAsync(g.other, time.Minute, http.MethodPost, "/v1/locks/"+holds[0].name+"?wait=30s&ttl=30s&owner=other")
		testutil.Eventually(t, 10*time.Second, "the other sidecar waits", func() bool {
			return sidecartest.Num(g.other.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+holds[0].name).Body["waiters"]) == 1
		})
		g.awaitSaved(t, holds)
		g.r.kill(t)
		args, unblock := c.block()
		g.r.spawn(t, args)
		code := awaitExit(t, g.r)
		unblock()
		g.a = g.r.start(t)
		losses := checkKept(t, g.a, g.other, holds)
		switch {
		case code == 0:
			failed = append(failed, fmt.Sprintf("%s: the successor that could not listen exited 0", c.name))
		case len(losses) > 0:
			failed = append(failed, fmt.Sprintf("%s: the successor that could not listen exited %d; after it, %d of %d holds lost (%s)",
				c.name, code, len(losses), len(holds), tally(losses)))
		}
		select {
		case r := <-waiter:
			failed = append(failed, fmt.Sprintf("%s: the other sidecar's waiter answered %d %s", c.name, r.Status, r.Raw))
		default:
		}
		if readLease(t, g.a, lease) != nil {
			g.a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
		}
	}
	if len(failed) > 0 {
		t.Fatal(strings.Join(failed, "\n"))
	}
}

// ---------------------------------------------------------------------------
// The torture.

// SIGKILL at random instants under a hammer of grants, releases, revokes and
// keepalives from several clients of the killed sidecar, while clients of
// another sidecar (never killed) contend for the same locks; every other
// cycle the successor is killed too, a few ms to 0.5 s after its exec (every
// fourth, twice). After each kill, once a successor serves, every told promise
// is checked (see torture.check: told leases and holds kept with their
// tokens, revoked leases 404, released locks released); at the end, no two
// grants of one lock were held at once (see torture.overlaps). Requests a kill
// cut are not promises: nothing is asserted of them.
func TestCrashTorture(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	g := newCrashRig(t)
	x := newTorture(g.a, g.other, lockNames("tortured", 12))
	x.start(8, 8)
	finish := sync.OnceFunc(x.finish)
	defer finish()
	const cycles = 20
	startKills := 0
	for i := range cycles {
		pause(time.Duration(200+rand.IntN(800))*time.Millisecond, nil) // the hammer runs; the kill comes at a random instant
		x.gate.shut()
		g.r.kill(t)
		x.kills.Add(1)
		x.gate.drain()
		x.client.CloseIdleConnections()
		for range i%2 + i%4/3 {
			g.r.spawn(t, g.r.args)
			if killAfter(t, g.r, time.Duration(5+rand.IntN(500))*time.Millisecond) {
				x.kills.Add(1)
				startKills++
			}
		}
		g.r.start(t)
		x.check(t)
		if i < cycles-1 {
			x.gate.reopen()
		}
	}
	finish()
	x.report(t, startKills, x.overlaps())
}

// breakStateWrites makes every write of the state directory dir fail, root or
// not (root ignores modes), and returns what undoes it (run by t's Cleanup
// too, so that the directory can be removed). Where chattr(1) can, the
// directory and everything in it are made immutable: no file is created,
// renamed, removed or written there, and what is there stays as it was.
// Elsewhere, state.json is replaced by a directory that is not empty: no
// rename or open for writing replaces it (the state written before is lost
// to a successor until the sidecar writes it again).
func breakStateWrites(t *testing.T, dir string) (restore func()) {
	t.Helper()
	if err := exec.Command("chattr", "-R", "+i", dir).Run(); err == nil {
		t.Logf("state writes broken: the state directory made immutable (chattr -R +i)")
		restore = func() {
			if out, err := exec.Command("chattr", "-R", "-i", dir).CombinedOutput(); err != nil {
				t.Errorf("chattr -R -i %s: %v %s", dir, err, out)
			}
		}
	} else {
		_ = exec.Command("chattr", "-R", "-i", dir).Run() // whatever a partial +i did
		path := filepath.Join(dir, statedir.StateFile)
		testutil.Eventually(t, 10*time.Second, "state.json replaced by a directory", func() bool {
			_ = os.Remove(path) // a write of the sidecar's may put it back in between
			return os.Mkdir(path, 0o700) == nil
		})
		if err := os.WriteFile(filepath.Join(path, "not-a-state-file"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("state writes broken: state.json replaced by a directory (chattr +i: %v)", err)
		restore = func() {
			if err := os.RemoveAll(path); err != nil {
				t.Error(err)
			}
		}
	}
	restore = sync.OnceFunc(restore)
	t.Cleanup(restore)
	return restore
}

// refused reports whether r is the answer of a grant the state directory
// could not record: 503 with the problem type state-unavailable.
func refused(r *sidecartest.Response) bool {
	return r.Status == http.StatusServiceUnavailable && strings.HasSuffix(sidecartest.Str(r.Body["type"]), "state-unavailable")
}

// While the state directory cannot be written, grants (a lease, a lock) are
// refused with 503 state-unavailable, /readyz answers 503 and
// coord_state_write_errors_total counts the failures; once writes work again,
// grants are answered again, and after a SIGKILL the successor keeps every
// hold that was answered 201, before, during (were any) and after the fault.
func TestCrashStateWriteFailureRefuses(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	g := newCrashRig(t)
	lease := g.lease(t)
	told := g.holdLocks(t, lease, lockNames("before-fault", 5))
	g.awaitSaved(t, told)

	restore := breakStateWrites(t, g.r.state)
	r, err := g.a.FaultCall(time.Minute, http.MethodPost, "/v1/leases?ttl=60s")
	if err != nil {
		t.Fatal(err)
	}
	if !refused(r) {
		t.Errorf("POST /v1/leases while state writes fail: %d %s; want 503 state-unavailable", r.Status, r.Raw)
	}
	faultLease := "" // answered 201 all the same: a promise
	if r.Status == http.StatusCreated {
		faultLease = sidecartest.Str(r.Body["lease"])
	}
	for _, n := range lockNames("during-fault", 3) {
		r, err := g.a.FaultCall(time.Minute, http.MethodPost, "/v1/locks/"+n+"?owner="+lease+"&lease="+lease)
		if err != nil {
			t.Fatal(err)
		}
		if !refused(r) {
			t.Errorf("POST /v1/locks/%s while state writes fail: %d %s; want 503 state-unavailable", n, r.Status, r.Raw)
		}
		if r.Status == http.StatusCreated { // a promise all the same
			told = append(told, crashHold{lease: lease, name: n, token: sidecartest.Num(r.Body["fencingToken"])})
		}
	}
	if v := sidecartest.MetricSum(t, g.a, "coord_state_write_errors_total"); v <= 0 {
		t.Errorf("coord_state_write_errors_total = %v while state writes fail; want above 0", v)
	}
	testutil.Eventually(t, 5*time.Second, "/readyz answers 503 while state writes fail", func() bool {
		resp, err := g.a.FaultCall(time.Minute, http.MethodGet, "/readyz")
		return err == nil && resp.Status == http.StatusServiceUnavailable
	})

	restore()
	testutil.Eventually(t, 10*time.Second, "a grant answered once state writes work again", func() bool {
		r, err := g.a.FaultCall(time.Minute, http.MethodPost, "/v1/locks/after-fault?owner="+lease+"&lease="+lease)
		if err != nil || r.Status != http.StatusCreated {
			return false
		}
		told = append(told, crashHold{lease: lease, name: "after-fault", token: sidecartest.Num(r.Body["fencingToken"])})
		return true
	})
	told = append(told, g.holdLocks(t, lease, lockNames("after-fault", 3))...)
	g.a.WaitReady(t)
	g.r.kill(t)
	g.a = g.r.start(t)
	if faultLease != "" && readLease(t, g.a, faultLease) == nil {
		t.Errorf("the lease answered 201 during the fault, %s, answers 404 after a SIGKILL and a successor", faultLease)
	}
	if losses := checkKept(t, g.a, g.other, told); len(losses) > 0 {
		t.Fatalf("after the fault, a SIGKILL and a successor: %d of %d told holds lost (%s)", len(losses), len(told), tally(losses))
	}
}

// A lease kept alive by its open stream alone (no keepalive call, nothing
// else changing) for longer than its TTL survives a SIGKILL: the state says
// it was pinned, and the successor gives its client the TTL from the resume
// to come back (the journal recorded only its grant, whose expiry has long
// passed). Before, the successor ended it as expired.
func TestCrashStreamKeptLeaseSurvivesKill(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	r := newRestartable(t, zkc.Servers(), zktest.Root(t), "10s")
	a := r.start(t)
	const ttl = 2 * time.Second
	lease := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=2s").Body["lease"])
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/streamed?lease="+lease)
	st := a.OpenStream(t, "/v1/leases/"+lease+"/events")
	if ev := st.Next(t, 10*time.Second); ev.Name != "lease" {
		t.Fatalf("first event %q, want lease", ev.Name)
	}
	opened := time.Now()
	// What this test is about is time passing: two TTLs with the stream open.
	testutil.Eventually(t, time.Minute, "two TTLs with the stream open", func() bool {
		return time.Since(opened) > 2*ttl
	})
	a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
	r.kill(t)
	b := r.start(t)
	got := b.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
	if holds, _ := got.Body["holds"].([]any); len(holds) != 1 {
		t.Fatalf("after the kill the lease holds %v, want its lock", got.Body["holds"])
	}
}
