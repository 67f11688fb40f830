package main

// Issue 36: ZooKeeper maintenance is invisible to applications. A rolling
// restart of a 3-node ensemble (followers first, the leader last; each server
// down 3 s and waited for until the leader counts it synced), stopped with
// SIGTERM in one variant and SIGKILL in the other, under several sidecar
// processes that each hold a lease, a lock, a candidacy and a group membership,
// follow them over SSE and run request loops (key puts and counter adds
// among them, each checked applied exactly once): no request fails, no hold is
// lost, no stream shows another leader or member set or tells of a loss, and
// /readyz answers 200 throughout (docs/OPERATIONS.md, "Upgrading ZooKeeper
// under running sidecars").

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

const (
	rollCars     = 3                // sidecar processes
	rollSession  = "10s"            // their session timeout (--suspend-wait defaults to it)
	rollDown     = 3 * time.Second  // how long each server stays down: the scenario, not a bound
	rollSettle   = time.Second      // quiet time after each server is synced again
	rollTimeout  = 60 * time.Second // a loop request's client timeout: only a failure reaches it
	rollPause    = 10 * time.Millisecond
	rollElection = "roll"
	rollGroup    = "roll"
)

// rollCar is one sidecar process of the rolling-restart test and what it holds.
type rollCar struct {
	idx     int
	proc    *restartable
	car     *sidecartest.Sidecar
	lease   string
	token   int64  // of the lock held-<idx>
	session string // its ZooKeeper session id before the roll
	// streams: the election's, the group's, the lease's and the session's
	election, group, leaseEvents, sessionEvents *sidecartest.EventLog
}

// rollTally counts what the loops and pollers saw. Safe for concurrent use.
type rollTally struct {
	phase atomic.Value // string: what the ensemble is going through now

	mu          sync.Mutex
	requests    int
	failures    int
	kinds       map[string]int // failures by kind (what, status, problem detail) and phase
	first       []string       // the first failures, with the phase each came in
	waits       []time.Duration
	longest     string // the request that waited longest
	longestWait time.Duration
	readyPolls  int
	readyBad    int
}

func (g *rollTally) setPhase(s string) { g.phase.Store(s) }

func (g *rollTally) phaseNow() string {
	s, _ := g.phase.Load().(string)
	return s
}

// fail records one failure of the given kind (a request, a readiness poll or
// a read showing another leader, member set or holder).
func (g *rollTally) fail(kind, format string, args ...any) {
	phase := g.phaseNow()
	msg := fmt.Sprintf(format, args...) + " [" + phase + "]"
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failures++
	if g.kinds == nil {
		g.kinds = map[string]int{}
	}
	g.kinds[kind+" ["+phase+"]"]++
	if len(g.first) < 8 {
		g.first = append(g.first, msg)
	}
}

// failKind names an unwanted answer: what was asked, the status and the
// problem's detail.
func failKind(what string, r *sidecartest.Response, err error) string {
	if err != nil {
		return what + ": no answer"
	}
	return fmt.Sprintf("%s: %d %s", what, r.Status, sidecartest.Str(r.Body["detail"]))
}

// call sends one loop request and counts it: a failure unless the answer's
// status is one of want. It returns the answer when it is one of want.
func (g *rollTally) call(c *rollCar, what, method, path string, want ...int) *sidecartest.Response {
	start := time.Now()
	r, err := c.car.FaultCall(rollTimeout, method, path)
	d := time.Since(start)
	g.mu.Lock()
	g.requests++
	g.waits = append(g.waits, d)
	if d > g.longestWait {
		g.longestWait = d
		g.longest = fmt.Sprintf("%s %s on sidecar %d: %s [%s]", method, path, c.idx, d.Round(time.Millisecond), g.phaseNow())
	}
	g.mu.Unlock()
	switch {
	case err != nil:
		g.fail(failKind(what, r, err), "sidecar %d: %s %s: %v after %s", c.idx, method, path, err, d.Round(time.Millisecond))
		return nil
	case !slices.Contains(want, r.Status):
		g.fail(failKind(what, r, err), "sidecar %d: %s %s: %d %s after %s", c.idx, method, path, r.Status, clip(r.Raw), d.Round(time.Millisecond))
		return nil
	}
	return r
}

func clip(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// rollRig is the rolling-restart scenario: an ensemble, the sidecars and the
// state they are to keep.
type rollRig struct {
	zkc     *zktest.Cluster
	cars    []*rollCar
	leader  string // the election's leader before the roll
	term    int64
	members []string // the group's member ids, sorted
	tally   rollTally

	// What the data loops were answered 2xx for: puts of each car's own key,
	// and the sum of the adds to the counter the cars share.
	dataMu sync.Mutex
	puts   map[int]int
	added  int64
}

// newRollRig starts the ensemble and the sidecar processes and makes every
// hold: car 0's candidate enrols first and sidecartest.Leads.
func newRollRig(t *testing.T) *rollRig {
	t.Helper()
	g := &rollRig{zkc: zktest.StartEnsemble(t, 3), puts: map[int]int{}}
	g.zkc.AwaitSynced(testutil.Patience(time.Minute))
	g.tally.setPhase("before the roll")
	root := zktest.Root(t)
	for i := range rollCars {
		g.cars = append(g.cars, startRollCar(t, g.zkc.Servers(), root, i))
	}
	for _, c := range g.cars {
		c.lease = sidecartest.Str(c.car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
		c.token = sidecartest.Num(c.car.Must(t, http.StatusCreated, http.MethodPost,
			fmt.Sprintf("/v1/locks/held-%d?lease=%s&owner=car-%d", c.idx, c.lease, c.idx)).Body["fencingToken"])
		c.car.Must(t, http.StatusCreated, http.MethodPost,
			fmt.Sprintf("/v1/elections/%s/candidates?id=car-%d&lease=%s", rollElection, c.idx, c.lease))
		c.car.Must(t, http.StatusCreated, http.MethodPost,
			fmt.Sprintf("/v1/groups/%s/members?id=m-%d&lease=%s", rollGroup, c.idx, c.lease))
		g.members = append(g.members, fmt.Sprintf("m-%d", c.idx))
		c.session = sidecartest.Str(c.car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	}
	sort.Strings(g.members)
	e := g.cars[0].car.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/"+rollElection)
	leader, _ := e.Body["leader"].(map[string]any)
	g.leader, g.term = sidecartest.Str(leader["candidate"]), sidecartest.Num(leader["term"])
	if g.leader != "car-0" || g.term == 0 {
		t.Fatalf("before the roll the election is %s, want car-0 leading with a term", e.Raw)
	}
	for _, c := range g.cars {
		c.election = sidecartest.FollowEvents(t, c.car, "/v1/elections/"+rollElection+"/events")
		c.group = sidecartest.FollowEvents(t, c.car, "/v1/groups/"+rollGroup+"/events")
		c.leaseEvents = sidecartest.FollowEvents(t, c.car, "/v1/leases/"+c.lease+"/events")
		c.sessionEvents = sidecartest.FollowEvents(t, c.car, "/v1/session/events")
		c.election.AwaitEvent(t, 10*time.Second, "the leader", sidecartest.Leads(g.leader))
		c.group.AwaitEvent(t, 10*time.Second, "the members", func(ev sidecartest.TimedEvent) bool { return slices.Equal(memberIDs(ev.Data), g.members) })
		c.leaseEvents.AwaitEvent(t, 10*time.Second, "the lease", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lease" })
	}
	return g
}

// startRollCar runs one sidecar process (the built binary) on servers and
// waits until it is ready; on failure the tail of its log is shown.
func startRollCar(t *testing.T, servers []string, root string, i int) *rollCar {
	t.Helper()
	r := &restartable{bin: sidecartest.BuildBinary(t), addr: sidecartest.FreeAddr(t), logFile: filepath.Join(t.TempDir(), "log")}
	r.args = []string{"--listen", r.addr, "--zk", strings.Join(servers, ","), "--zk-root", root,
		"--session-timeout", rollSession}
	t.Cleanup(func() {
		if t.Failed() {
			var lines []string // request lines left out: the loops' requests are counted
			for _, l := range strings.Split(strings.TrimSpace(r.logs(t)), "\n") {
				if l != "" && !strings.Contains(l, `"msg":"request"`) {
					lines = append(lines, l)
				}
			}
			if len(lines) > 0 {
				t.Logf("sidecar %d's log but its request lines, the last:\n%s", i, strings.Join(lines[max(0, len(lines)-25):], "\n"))
			}
		}
	})
	return &rollCar{idx: i, proc: r, car: r.start(t)}
}

// memberIDs is the sorted member ids of a group body.
func memberIDs(body map[string]any) []string {
	ms, _ := body["members"].([]any)
	ids := make([]string, 0, len(ms))
	for _, m := range ms {
		mm, _ := m.(map[string]any)
		ids = append(ids, sidecartest.Str(mm["id"]))
	}
	sort.Strings(ids)
	return ids
}

// writer keeps the lease alive and cycles a lock of the car's own (another
// lock than the one it holds) until stop closes.
func (g *rollRig) writer(c *rollCar, stop <-chan struct{}) {
	for n := 0; ; n++ {
		if !rollWait(stop) {
			return
		}
		if n%2 == 0 {
			g.tally.call(c, "keepalive", http.MethodPost, "/v1/leases/"+c.lease+"/keepalive", http.StatusOK)
			continue
		}
		lock := fmt.Sprintf("/v1/locks/cycle-%d", c.idx)
		r := g.tally.call(c, "lock", http.MethodPost, lock+"?ttl=30s&owner=cycler", http.StatusCreated)
		if r != nil {
			g.tally.call(c, "unlock", http.MethodDelete, lock+"?lease="+sidecartest.Str(r.Body["lease"]), http.StatusNoContent)
		}
	}
}

// reader reads the election, the group, the held lock and the lease in turn
// until stop closes; an answer showing another leader, member set, holder or
// holds counts as a failure.
func (g *rollRig) reader(c *rollCar, stop <-chan struct{}) {
	for n := 0; ; n++ {
		if !rollWait(stop) {
			return
		}
		switch n % 4 {
		case 0:
			if r := g.tally.call(c, "read election", http.MethodGet, "/v1/elections/"+rollElection, http.StatusOK); r != nil {
				leader, _ := r.Body["leader"].(map[string]any)
				if sidecartest.Str(leader["candidate"]) != g.leader || sidecartest.Num(leader["term"]) != g.term {
					g.tally.fail("an election read showing another leader", "sidecar %d: the election read shows %s", c.idx, clip(r.Raw))
				}
			}
		case 1:
			if r := g.tally.call(c, "read group", http.MethodGet, "/v1/groups/"+rollGroup, http.StatusOK); r != nil && !slices.Equal(memberIDs(r.Body), g.members) {
				g.tally.fail("a group read showing other members", "sidecar %d: the group read shows %s", c.idx, clip(r.Raw))
			}
		case 2:
			if r := g.tally.call(c, "read held lock", http.MethodGet, fmt.Sprintf("/v1/locks/held-%d", c.idx), http.StatusOK); r != nil {
				h, _ := r.Body["holder"].(map[string]any)
				if sidecartest.Num(h["fencingToken"]) != c.token {
					g.tally.fail("a lock read showing another holder", "sidecar %d: the held lock's read shows %s", c.idx, clip(r.Raw))
				}
			}
		case 3:
			if r := g.tally.call(c, "read lease", http.MethodGet, "/v1/leases/"+c.lease, http.StatusOK); r != nil {
				if holds, _ := r.Body["holds"].([]any); len(holds) != 3 {
					g.tally.fail("a lease read showing other holds", "sidecar %d: the lease read shows %s", c.idx, clip(r.Raw))
				}
			}
		}
	}
}

// rollCounter is the counter every car adds to.
const rollCounter = "roll"

// data writes the car's own key and adds to the shared counter in turn until
// stop closes, and counts what it was answered 2xx for: at the end, each key's
// version and the counter's value must show each write applied exactly once
// (checkData). Car i adds i+1: two cars never make the very same change.
func (g *rollRig) data(c *rollCar, stop <-chan struct{}) {
	for n := 0; ; n++ {
		if !rollWait(stop) {
			return
		}
		if n%2 == 0 {
			if r := g.tally.call(c, "key put", http.MethodPut, fmt.Sprintf("/v1/kv/roll-%d", c.idx), http.StatusOK); r != nil {
				g.dataMu.Lock()
				g.puts[c.idx]++
				g.dataMu.Unlock()
			}
			continue
		}
		delta := int64(c.idx + 1)
		if r := g.tally.call(c, "counter add", http.MethodPost, fmt.Sprintf("/v1/counters/%s?add=%d", rollCounter, delta), http.StatusOK); r != nil {
			g.dataMu.Lock()
			g.added += delta
			g.dataMu.Unlock()
		}
	}
}

// checkData fails the test unless every put and add answered 2xx was applied
// exactly once: car i's key at version puts-1, the counter at the sum added.
func (g *rollRig) checkData(t *testing.T) {
	t.Helper()
	g.dataMu.Lock()
	defer g.dataMu.Unlock()
	// A read is served by the reading sidecar's server, which may not have
	// applied the last writes yet (a follower just back lags the leader; reads
	// are not synced): a write missing is one that stays missing.
	car := g.cars[0].car
	for _, c := range g.cars {
		want, got := fmt.Sprint(g.puts[c.idx]-1), ""
		if !testutil.Within(30*time.Second, func() bool {
			got = car.Must(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/kv/roll-%d", c.idx)).Header.Get("Version")
			return got == want
		}) {
			t.Errorf("key roll-%d at version %s after %d puts answered 200, want %s", c.idx, got, g.puts[c.idx], want)
		}
	}
	var v int64
	if !testutil.Within(30*time.Second, func() bool {
		v = sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/counters/"+rollCounter).Body["value"])
		return v == g.added
	}) {
		t.Errorf("counter at %d, want %d (the sum of the adds answered 200)", v, g.added)
	}
	t.Logf("data: key puts answered 200 %v, counter adds summing %d, each applied once", g.puts, g.added)
}

// readiness polls /readyz every 100 ms until stop closes: anything but 200 is
// a failure.
func (g *rollRig) readiness(c *rollCar, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		r, err := c.car.FaultCall(10*time.Second, http.MethodGet, "/readyz")
		g.tally.mu.Lock()
		g.tally.readyPolls++
		bad := err != nil || r.Status != http.StatusOK
		if bad {
			g.tally.readyBad++
		}
		g.tally.mu.Unlock()
		switch {
		case err != nil:
			g.tally.fail(failKind("/readyz", r, err), "sidecar %d: /readyz: %v", c.idx, err)
		case r.Status != http.StatusOK:
			g.tally.fail(failKind("/readyz", r, err), "sidecar %d: /readyz: %d %s", c.idx, r.Status, clip(r.Raw))
		}
	}
}

// rollWait pauses between two loop requests; false once stop is closed.
func rollWait(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return false
	case <-time.After(rollPause):
		return true
	}
}

// startLoads starts every car's writer, reader and readiness poller; the
// returned function stops them and waits until they have returned.
func (g *rollRig) startLoads() (stopAll func()) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range g.cars {
		for _, loop := range []func(*rollCar, <-chan struct{}){g.writer, g.reader, g.data, g.readiness} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				loop(c, stop)
			}()
		}
	}
	return sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
}

// roll restarts every server in turn, the followers first and the leader
// last: down (by down) for rollDown, started again, and waited for until the
// leader counts every follower synced.
func (g *rollRig) roll(t *testing.T, how string, down func(int)) {
	t.Helper()
	leader := g.zkc.Leader()
	if leader < 0 {
		t.Fatal("no ZooKeeper leader before the roll")
	}
	var order []int
	for i := range 3 {
		if i != leader {
			order = append(order, i)
		}
	}
	order = append(order, leader)
	for _, i := range order {
		role := g.zkc.Mode(i)
		g.tally.setPhase(fmt.Sprintf("server %d (%s) down by %s", i, role, how))
		start := time.Now()
		down(i)
		time.Sleep(rollDown)
		g.tally.setPhase(fmt.Sprintf("server %d (%s) restarting", i, role))
		g.zkc.Restart(i)
		g.zkc.AwaitSynced(testutil.Patience(time.Minute))
		g.tally.setPhase(fmt.Sprintf("server %d (%s) back and synced", i, role))
		t.Logf("server %d (%s) stopped by %s and back, synced, after %s; the ZooKeeper leader is now server %d",
			i, role, how, time.Since(start).Round(100*time.Millisecond), g.zkc.Leader())
		time.Sleep(rollSettle)
	}
	g.tally.setPhase("after the roll")
}

// TestRollingRestartIsInvisible: issue 36's rolling restart, in two variants
// (each server stopped with SIGTERM, or killed with SIGKILL), each on an
// ensemble and sidecars of its own.
func TestRollingRestartIsInvisible(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("starts a three-node ensemble and sidecar processes")
	}
	for _, v := range []struct {
		name string
		down func(*zktest.Cluster, int)
	}{
		{"SIGTERM", (*zktest.Cluster).Stop},
		{"SIGKILL", (*zktest.Cluster).Kill},
	} {
		t.Run(v.name, func(t *testing.T) {
			g := newRollRig(t)
			stopLoads := g.startLoads()
			defer stopLoads()
			time.Sleep(rollSettle) // the loops on a quiet ensemble first
			g.roll(t, v.name, func(i int) { v.down(g.zkc, i) })
			time.Sleep(2 * time.Second) // and on the restored ensemble
			stopLoads()
			g.report(t)
			g.checkStreams(t)
			g.checkHolds(t)
			g.checkData(t)
		})
	}
}

// report logs the figures (requests, failures, waits, stream events,
// readiness polls) and fails the test on any failed request or poll.
func (g *rollRig) report(t *testing.T) {
	t.Helper()
	g.tally.mu.Lock()
	defer g.tally.mu.Unlock()
	waits := slices.Clone(g.tally.waits)
	slices.Sort(waits)
	var median, p99 time.Duration
	if n := len(waits); n > 0 {
		median, p99 = waits[n/2], waits[n*99/100]
	}
	events := map[string]int{}
	for _, c := range g.cars {
		for _, l := range []*sidecartest.EventLog{c.election, c.group, c.leaseEvents, c.sessionEvents} {
			for _, name := range l.Names() {
				events[name]++
			}
		}
	}
	t.Logf("figures: %d requests, %d failures; waits median %s, p99 %s, longest %s; /readyz %d polls, %d not 200; stream events %v",
		g.tally.requests, g.tally.failures, median.Round(time.Microsecond), p99.Round(time.Millisecond),
		g.tally.longest, g.tally.readyPolls, g.tally.readyBad, events)
	if g.tally.failures > 0 {
		var kinds []string
		for k, n := range g.tally.kinds {
			kinds = append(kinds, fmt.Sprintf("%4d  %s", n, k))
		}
		sort.Strings(kinds)
		t.Errorf("%d failures (requests not answered as documented, reads showing another state, /readyz not 200), by kind and phase:\n%s\nthe first:\n%s",
			g.tally.failures, strings.Join(kinds, "\n"), strings.Join(g.tally.first, "\n"))
	}
}

// checkStreams fails the test on an election event showing another leader (or
// none), a group event showing another member set, a lease stream telling of a
// loss, a session stream telling of a lost session, or a stream that ended.
func (g *rollRig) checkStreams(t *testing.T) {
	t.Helper()
	for _, c := range g.cars {
		var bad []string
		for _, ev := range c.election.Events() {
			if term, cand, ok := sidecartest.EventLeader(ev.Event); !ok || cand != g.leader || term != g.term {
				bad = append(bad, fmt.Sprintf("election event %s %v", ev.Name, ev.Data))
			}
		}
		for _, ev := range c.group.Events() {
			if ev.Name != "group" || !slices.Equal(memberIDs(ev.Data), g.members) {
				bad = append(bad, fmt.Sprintf("group event %s members %v (suspended %v)", ev.Name, memberIDs(ev.Data), ev.Data["suspended"]))
			}
		}
		for _, ev := range c.leaseEvents.Events() {
			if ev.Name != "lease" {
				bad = append(bad, fmt.Sprintf("lease event %s %v", ev.Name, ev.Data))
			}
		}
		for _, ev := range c.sessionEvents.Events() {
			if s := sidecartest.Str(ev.Data["state"]); s == "lost" || s == "closed" {
				bad = append(bad, "session event "+s)
			}
		}
		for _, l := range []*sidecartest.EventLog{c.election, c.group, c.leaseEvents, c.sessionEvents} {
			l.Mu.Lock()
			if l.Ended {
				bad = append(bad, fmt.Sprintf("%s ended: %v", l.Path, l.Err))
			}
			l.Mu.Unlock()
		}
		if len(bad) > 0 {
			t.Errorf("sidecar %d's streams (session events %v):\n%s", c.idx, c.sessionEvents.Names(), strings.Join(clipLines(bad, 12), "\n"))
		}
	}
}

// clipLines keeps the first n lines and counts the rest.
func clipLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(slices.Clone(lines[:n]), fmt.Sprintf("... and %d more", len(lines)-n))
}

// checkHolds waits until every sidecar is connected again, then fails the
// test on any hold not kept: the same session, the lease holding its three
// things, the same lock token, the same leader and term, the same members.
func (g *rollRig) checkHolds(t *testing.T) {
	t.Helper()
	for _, c := range g.cars {
		testutil.Eventually(t, 30*time.Second, fmt.Sprintf("sidecar %d connected", c.idx), func() bool {
			r, err := c.car.FaultCall(10*time.Second, http.MethodGet, "/v1/session")
			return err == nil && r.Status == http.StatusOK && sidecartest.Str(r.Body["state"]) == "connected"
		})
		if s := sidecartest.Str(c.car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"]); s != c.session {
			t.Errorf("sidecar %d: session %s after the roll, %s before", c.idx, s, c.session)
		}
		r, err := c.car.FaultCall(10*time.Second, http.MethodGet, "/v1/leases/"+c.lease)
		if err != nil || r.Status != http.StatusOK {
			t.Errorf("sidecar %d: its lease after the roll: %v %+v", c.idx, err, r)
		} else if holds, _ := r.Body["holds"].([]any); len(holds) != 3 {
			t.Errorf("sidecar %d: its lease holds %v after the roll, want its lock, candidacy and membership", c.idx, holds)
		}
		h, _ := c.car.Must(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/locks/held-%d", c.idx)).Body["holder"].(map[string]any)
		if sidecartest.Num(h["fencingToken"]) != c.token {
			t.Errorf("sidecar %d: lock held-%d's holder %v after the roll, want token %d", c.idx, c.idx, h, c.token)
		}
		e := c.car.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/"+rollElection)
		if l, _ := e.Body["leader"].(map[string]any); sidecartest.Str(l["candidate"]) != g.leader || sidecartest.Num(l["term"]) != g.term {
			t.Errorf("sidecar %d: the election after the roll is %s, want %s leading in term %d", c.idx, e.Raw, g.leader, g.term)
		}
		if cands, _ := e.Body["candidates"].([]any); len(cands) != rollCars {
			t.Errorf("sidecar %d: %d candidates after the roll, want %d", c.idx, len(cands), rollCars)
		}
		gr := c.car.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/"+rollGroup)
		if ids := memberIDs(gr.Body); !slices.Equal(ids, g.members) {
			t.Errorf("sidecar %d: the group's members after the roll are %v, want %v", c.idx, ids, g.members)
		}
	}
}
