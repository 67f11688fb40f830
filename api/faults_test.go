package api_test

// Fault scenarios of issue 6 (docs/RELIABILITY.md): the ZooKeeper leader killed
// and quorum lost under a lock and an election workload on three sidecars, and a
// sidecar cut off from ZooKeeper for less and for more than its session timeout.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// ---------------------------------------------------------------------------
// Election observation.

// leaderSeen is one sighting of a leader: by a subscriber's event or by a
// candidacy answer.
type leaderSeen struct {
	Source    string
	Term      int64
	Candidate string
	At        time.Time
}

// termBook collects every leader sighting and checks the election's safety:
// a term names exactly one candidate (term → candidate is a function, so no two
// leaders ever share a term), and no subscriber sees terms go backwards.
type termBook struct {
	mu       sync.Mutex
	seen     []leaderSeen
	subs     []*sidecartest.EventLog
	subNames []string
}

func (b *termBook) subscribe(t testing.TB, car *sidecartest.Sidecar, carName, election string) {
	t.Helper()
	l := sidecartest.FollowEvents(t, car, "/v1/elections/"+election+"/events")
	b.mu.Lock()
	b.subs = append(b.subs, l)
	b.subNames = append(b.subNames, fmt.Sprintf("subscriber %d on %s", len(b.subs), carName))
	b.mu.Unlock()
}

// candidacy records a candidacy answer (201) that says its candidate sidecartest.Leads.
func (b *termBook) candidacy(source string, r *sidecartest.Response) {
	if r == nil || r.Status != http.StatusCreated || r.Body["leader"] != true {
		return
	}
	b.mu.Lock()
	b.seen = append(b.seen, leaderSeen{Source: source, Term: sidecartest.Num(r.Body["term"]), Candidate: sidecartest.Str(r.Body["candidate"]), At: time.Now()})
	b.mu.Unlock()
}

// verify fails the test on two leaders with one term or on a term going
// backwards for a subscriber, and returns the number of distinct terms.
func (b *termBook) verify(t *testing.T) int {
	t.Helper()
	b.mu.Lock()
	seen := append([]leaderSeen(nil), b.seen...)
	subs, names := b.subs, b.subNames
	b.mu.Unlock()
	events := 0
	for i, l := range subs {
		var last int64
		for _, ev := range l.Events() {
			term, cand, ok := sidecartest.EventLeader(ev.Event)
			if !ok {
				continue
			}
			events++
			if term < last {
				t.Errorf("%s: term went backwards from %d to %d (leader %s)", names[i], last, term, cand)
			}
			last = term
			seen = append(seen, leaderSeen{Source: names[i], Term: term, Candidate: cand, At: ev.At})
		}
	}
	byTerm := map[int64]leaderSeen{}
	for _, s := range seen {
		if s.Term == 0 {
			t.Errorf("%s: leader %s with term 0", s.Source, s.Candidate)
			continue
		}
		if prev, ok := byTerm[s.Term]; ok && prev.Candidate != s.Candidate {
			t.Errorf("term %d has two leaders: %s (seen by %s) and %s (seen by %s)", s.Term, prev.Candidate, prev.Source, s.Candidate, s.Source)
		}
		byTerm[s.Term] = s
	}
	t.Logf("election: %d leader events on %d subscribers and %d candidacy answers: %d distinct terms, one leader each",
		events, len(subs), len(seen)-events, len(byTerm))
	return len(byTerm)
}

// electionChurn keeps an election changing leaders: candidates on every sidecar,
// each with a lease of its own, and a loop that makes the current leader resign
// with requeue (LeaderSelector-style turns). Candidates whose lease was lost
// sidecartest.Campaign again under a new lease and a new id.
type electionChurn struct {
	cars    []*sidecartest.Sidecar
	name    string
	book    *termBook
	timeout time.Duration

	mu        sync.Mutex
	cands     map[string]*churnCandidate // by candidate id
	resigns   atomic.Int64
	rejoins   atomic.Int64
	generated int
	sidecartest.Outcomes
}

type churnCandidate struct {
	car   int
	lease string
}

// enrol makes a lease and a candidate on car i; false if the sidecar could not
// (it is unavailable: the caller tries again later).
func (c *electionChurn) enrol(i int) bool {
	car := c.cars[i]
	l, err := car.FaultCall(c.timeout, http.MethodPost, "/v1/leases?ttl=10m")
	if err != nil {
		c.Fail("lease on sidecar %d: %v", i, err)
		return false
	}
	c.Count("POST lease", l)
	if l.Status != http.StatusCreated {
		return false
	}
	lease := sidecartest.Str(l.Body["lease"])
	c.mu.Lock()
	c.generated++
	id := fmt.Sprintf("car%d-c%d", i, c.generated)
	c.mu.Unlock()
	r, err := car.FaultCall(c.timeout, http.MethodPost, "/v1/elections/"+c.name+"/candidates?id="+id+"&lease="+lease)
	if err != nil {
		c.Fail("campaign %s: %v", id, err)
		return false
	}
	c.Count("POST candidate", r)
	c.book.candidacy("campaign answer", r)
	if r.Status != http.StatusCreated {
		_, _ = car.FaultCall(c.timeout, http.MethodDelete, "/v1/leases/"+lease)
		return false
	}
	c.mu.Lock()
	c.cands[id] = &churnCandidate{car: i, lease: lease}
	c.mu.Unlock()
	return true
}

// run churns until stop closes (or at most rounds rounds).
func (c *electionChurn) run(perCar, rounds int, stop <-chan struct{}) {
	c.cands = map[string]*churnCandidate{}
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
	for i := range c.cars {
		for range perCar {
			c.enrol(i)
		}
	}
	for round := 0; round < rounds; round++ {
		if !pause(10 * time.Millisecond) {
			return
		}
		car := c.cars[round%len(c.cars)]
		c.mu.Lock()
		known := make([]string, 0, len(c.cands))
		for id := range c.cands {
			known = append(known, id)
		}
		c.mu.Unlock()
		r, err := car.FaultCall(c.timeout, http.MethodGet, "/v1/elections/"+c.name)
		if err != nil {
			c.Fail("read election: %v", err)
			continue
		}
		c.Count("GET election", r)
		if r.Status != http.StatusOK {
			pause(50 * time.Millisecond)
			continue
		}
		// A candidate known before the read and missing from it is gone: its lease
		// ended with its session (only this loop resigns candidates).
		present := map[string]bool{}
		for _, x := range r.Body["candidates"].([]any) {
			present[sidecartest.Str(x.(map[string]any)["candidate"])] = true
		}
		c.mu.Lock()
		for _, id := range known {
			if !present[id] {
				delete(c.cands, id)
				c.rejoins.Add(1)
			}
		}
		c.mu.Unlock()
		leader, _ := r.Body["leader"].(map[string]any)
		c.mu.Lock()
		var cand *churnCandidate
		id := ""
		if leader != nil {
			id = sidecartest.Str(leader["candidate"])
			cand = c.cands[id]
		}
		live := len(c.cands)
		c.mu.Unlock()
		if live < len(c.cars)*perCar {
			c.enrol(round % len(c.cars))
		}
		if cand == nil {
			// Nobody sidecartest.Leads yet, or the leader's lease was lost and its node not yet
			// expired on the server: look again shortly.
			pause(20 * time.Millisecond)
			continue
		}
		res, err := c.cars[cand.car].FaultCall(c.timeout, http.MethodDelete,
			"/v1/elections/"+c.name+"/candidates/"+id+"?lease="+cand.lease+"&requeue=true")
		if err != nil {
			c.Fail("resign %s: %v", id, err)
			continue
		}
		c.Count("DELETE candidate", res)
		switch res.Status {
		case http.StatusCreated:
			c.resigns.Add(1)
			c.book.candidacy("requeue answer", res)
		case http.StatusNotFound:
			// The lease ended with its session: forget the candidate.
			c.mu.Lock()
			delete(c.cands, id)
			c.mu.Unlock()
			c.rejoins.Add(1)
		case http.StatusServiceUnavailable:
			pause(50 * time.Millisecond)
		default:
			c.Fail("resign %s: %d %s", id, res.Status, res.Raw)
		}
	}
}

func (c *electionChurn) report(t *testing.T) {
	t.Helper()
	answers, failures := c.Snapshot()
	t.Logf("election churn: %d resignations with requeue, %d candidates lost with their session; answers %s", c.resigns.Load(), c.rejoins.Load(), strings.Join(answers, ", "))
	for _, f := range failures {
		t.Error(f)
	}
}

// ---------------------------------------------------------------------------
// The ZooKeeper ensemble under faults.

// awaitGrants waits until the workload reached n grants (or ended).
func awaitGrants(t *testing.T, w *lockWorkload, done <-chan struct{}, n int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for w.granted.Load() < n {
		select {
		case <-done:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d grants of %d within %s", w.granted.Load(), n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Three sidecars, each given the three servers of an ensemble, run a lock workload
// (600 grants: 250 before the kill, 250 on two nodes, the rest after the
// restart; fenced, checked by porcupine) and an election churn while the
// ensemble's leader is killed and restarted; then while quorum is lost and
// restored. No overlapping grant, no stale token accepted, every request answered
// (201, 409 or 503), the runs complete once quorum is back, and no term of the
// election has two leaders.
func TestFaultsOnEnsemble(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("starts a three-node ensemble")
	}
	zkc := zktest.StartEnsemble(t, 3)
	root := zktest.Root(t)
	var cars []*sidecartest.Sidecar
	for range 3 {
		cars = append(cars, sidecartest.Start(t, zkc.Servers(), root, "--session-timeout", "4s"))
	}
	book := &termBook{}
	for i, car := range cars {
		book.subscribe(t, car, fmt.Sprintf("sidecar %d", i), "ensemble")
		book.subscribe(t, car, fmt.Sprintf("sidecar %d", i), "ensemble")
	}
	churnStop := make(chan struct{})
	churnDone := make(chan struct{})
	churn := &electionChurn{cars: cars, name: "ensemble", book: book, timeout: 40 * time.Second}
	go func() {
		defer close(churnDone)
		churn.run(2, 100000, churnStop)
	}()
	stopChurn := sync.OnceFunc(func() {
		close(churnStop)
		select {
		case <-churnDone:
		case <-time.After(60 * time.Second):
			t.Error("the election churn did not stop")
		}
	})
	defer stopChurn()

	t.Run("leader-killed", func(t *testing.T) {
		w := &lockWorkload{cars: cars, lock: "leader-killed", clients: 24, target: 600,
			wait: 5 * time.Second, timeout: 40 * time.Second, deadline: time.Now().Add(4 * time.Minute)}
		stop := make(chan struct{})
		defer close(stop)
		done := w.start(stop)
		awaitGrants(t, w, done, 250, 2*time.Minute)
		leader := zkc.Leader()
		if leader < 0 {
			t.Fatal("no leader")
		}
		killedAt := w.granted.Load()
		zkc.Kill(leader)
		t.Logf("killed the leader, node %d, after %d grants", leader, killedAt)
		// Quorum remains with two nodes: the run goes on.
		awaitGrants(t, w, done, killedAt+250, 2*time.Minute)
		zkc.Restart(leader)
		t.Logf("restarted node %d after %d grants; leader now node %d", leader, w.granted.Load(), zkc.Leader())
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			t.Fatal("the workload did not end")
		}
		w.verify(t)
	})

	t.Run("quorum-lost", func(t *testing.T) {
		w := &lockWorkload{cars: cars, lock: "quorum-lost", clients: 24, target: 300,
			wait: 5 * time.Second, timeout: 40 * time.Second, deadline: time.Now().Add(4 * time.Minute)}
		stop := make(chan struct{})
		defer close(stop)
		done := w.start(stop)
		awaitGrants(t, w, done, 100, 2*time.Minute)
		leader := zkc.Leader()
		if leader < 0 {
			t.Fatal("no leader")
		}
		other := (leader + 1) % 3
		lostAt := w.granted.Load()
		zkc.Kill(leader)
		zkc.Kill(other)
		t.Logf("killed nodes %d (leader) and %d after %d grants: no quorum", leader, other, lostAt)
		// Quorum stays lost until every sidecar has reported its holds lost (2/3
		// of the session timeout without an answer: the session could have
		// expired); the sessions themselves are kept, and the ensemble gives
		// them back once it has a leader again.
		for i, car := range cars {
			testutil.Eventually(t, 30*time.Second, fmt.Sprintf("sidecar %d: holds reported lost", i), func() bool {
				return sidecartest.MetricSum(t, car, "coord_zk_session_doubts_total") >= 1
			})
		}
		during := w.granted.Load()
		zkc.Restart(leader)
		zkc.Restart(other)
		t.Logf("restored quorum; %d grants while it was lost (answers under way)", during-lostAt)
		select {
		case <-done:
		case <-time.After(5 * time.Minute):
			t.Fatal("the workload did not end once quorum was back")
		}
		w.verify(t)
	})

	stopChurn()
	churn.report(t)
	if n := book.verify(t); n < 20 {
		t.Errorf("only %d terms: the election hardly changed leaders", n)
	}
}

// ---------------------------------------------------------------------------
// A sidecar cut off from ZooKeeper.

// fault names the two ways of cutting a sidecar off: connections reset at once,
// or a silent partition that drops every byte.
var cutFaults = []struct {
	name  string
	apply func(*faultproxy.Proxy)
}{
	{"hard-cut", (*faultproxy.Proxy).Cut},
	{"blackhole", (*faultproxy.Proxy).Blackhole},
}

// A cut shorter than the session timeout: the cut-off sidecar keeps its session
// and its grant (another sidecar sees the same holder and token throughout, and
// is not granted), and reports `suspended` then `reconnected`, never `lost`.
func TestShortCutKeepsGrants(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	for _, f := range cutFaults {
		t.Run(f.name, func(t *testing.T) {
			proxy, cut, other := sidecartest.CutOffPair(t, zkc, "8s")

			sess := sidecartest.FollowEvents(t, cut, "/v1/session/events")
			sess.AwaitEvent(t, 5*time.Second, "connected", sidecartest.SessionEvent("connected"))
			before := sidecartest.Str(cut.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
			lease := sidecartest.Str(cut.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
			g := cut.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/kept?owner=cut-off&lease="+lease)
			token := sidecartest.Num(g.Body["fencingToken"])
			leaseEvents := sidecartest.FollowEvents(t, cut, "/v1/leases/"+lease+"/events")
			leaseEvents.AwaitEvent(t, 5*time.Second, "lease", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lease" })

			waiter := make(chan *sidecartest.Response, 1)
			go func() {
				r, err := other.FaultCall(60*time.Second, http.MethodPost, "/v1/locks/kept?wait=45s&owner=waiter")
				if err != nil {
					r = &sidecartest.Response{Status: -1, Raw: []byte(err.Error())}
				}
				waiter <- r
			}()
			testutil.Eventually(t, 10*time.Second, "the other sidecar waits", func() bool {
				return sidecartest.Num(other.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/kept").Body["waiters"]) == 1
			})
			holderToken := func() int64 {
				h, _ := other.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/kept").Body["holder"].(map[string]any)
				return sidecartest.Num(h["fencingToken"])
			}

			start := time.Now()
			f.apply(proxy)
			if f.name == "hard-cut" {
				sess.AwaitEvent(t, 5*time.Second, "suspended", sidecartest.SessionEvent("suspended"))
			}
			// The fault lasts as long as this try takes (1.5s): another client on the
			// other sidecar is refused the lock held by the cut-off sidecar.
			r := other.Must(t, http.StatusConflict, http.MethodPost, "/v1/locks/kept?wait=1500ms&owner=other")
			if h, _ := r.Body["holder"].(map[string]any); sidecartest.Num(h["fencingToken"]) != token {
				t.Fatalf("during the cut the holder is %s, want token %d", r.Raw, token)
			}
			if got := holderToken(); got != token {
				t.Fatalf("during the cut the holder's token is %d, want %d", got, token)
			}
			proxy.Restore()
			cutFor := time.Since(start)
			if f.name == "blackhole" {
				// Restore closes the connection that lost bytes: the sidecar notices then.
				sess.AwaitEvent(t, 10*time.Second, "suspended", sidecartest.SessionEvent("suspended"))
			}
			sess.AwaitEvent(t, 10*time.Second, "reconnected", sidecartest.SessionEvent("reconnected"))
			for _, ev := range sess.Events() {
				if sidecartest.Str(ev.Data["state"]) == "lost" {
					t.Fatalf("session events %v: lost on a cut of %s", sess.Names(), cutFor)
				}
			}
			cut.WaitReady(t)
			if after := sidecartest.Str(cut.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"]); after != before {
				t.Fatalf("session changed from %s to %s", before, after)
			}
			if got := holderToken(); got != token {
				t.Fatalf("after the cut the holder's token is %d, want %d", got, token)
			}
			if ev := leaseEvents.Pending(); len(ev) != 0 {
				t.Fatalf("lease stream after a short cut: %+v", ev)
			}
			holds := cut.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease).Body["holds"].([]any)
			if len(holds) != 1 {
				t.Fatalf("the lease holds %v after the cut", holds)
			}
			select {
			case r := <-waiter:
				t.Fatalf("the other sidecar's waiter was answered while the lock was held: %d %s", r.Status, r.Raw)
			default:
			}
			// Released by its holder, the lock goes to the waiter with a higher token.
			cut.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/kept?lease="+lease)
			select {
			case r := <-waiter:
				if r.Status != http.StatusCreated || sidecartest.Num(r.Body["fencingToken"]) <= token {
					t.Fatalf("waiter after the release: %d %s", r.Status, r.Raw)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter was not granted after the release")
			}
			t.Logf("%s for %s: session %s kept, token %d held throughout, events %v",
				f.name, cutFor.Round(time.Millisecond), before, token, sess.Names())
		})
	}
}

// A cut longer than the session timeout: the cut-off sidecar reports its lock and
// its candidacy lost (`lost-hold` on their lease, once the suspension reaches 2/3
// of the session timeout) before the other sidecar is granted the lock, and before
// any subscriber sees the next leader of the election its candidate led; a write
// with the lost grant's token is then fenced off; terms stay one leader each and
// never go backwards, on both sidecars; once the network is back ZooKeeper tells
// the cut-off sidecar its session expired (`lost`: the sidecar never gives up a
// session itself), and it serves again under a new session.
func TestLongCutReportsLostBeforeOthersAreGranted(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	for _, f := range cutFaults {
		t.Run(f.name, func(t *testing.T) {
			proxy, cut, other := sidecartest.CutOffPair(t, zkc, "2s")
			book := &termBook{}
			book.subscribe(t, cut, "the cut-off sidecar", "cut")
			book.subscribe(t, other, "the other sidecar", "cut")
			var res fencedResource

			sess := sidecartest.FollowEvents(t, cut, "/v1/session/events")
			sess.AwaitEvent(t, 5*time.Second, "connected", sidecartest.SessionEvent("connected"))
			lease := sidecartest.Str(cut.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
			g := cut.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/taken?owner=cut-off&lease="+lease)
			token := sidecartest.Num(g.Body["fencingToken"])
			if ok, _ := res.write(token); !ok {
				t.Fatal("first write refused")
			}
			c1 := campaignOn(t, cut, "cut", "c1", "lease="+lease)
			book.candidacy("campaign c1", c1)
			if c1.Body["leader"] != true {
				t.Fatalf("c1 does not lead: %s", c1.Raw)
			}
			c2 := campaignOn(t, other, "cut", "c2", "ttl=60s")
			leaseEvents := sidecartest.FollowEvents(t, cut, "/v1/leases/"+lease+"/events")
			leaseEvents.AwaitEvent(t, 5*time.Second, "lease", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lease" })
			for _, sub := range book.subs {
				sub.AwaitEvent(t, 5*time.Second, "c1 sidecartest.Leads", sidecartest.Leads("c1"))
			}

			type grant struct {
				r   *sidecartest.Response
				at  time.Time // when the answer arrived
				err error
			}
			granted := make(chan grant, 1)
			go func() {
				r, err := other.FaultCall(60*time.Second, http.MethodPost, "/v1/locks/taken?wait=45s&owner=survivor")
				granted <- grant{r: r, at: time.Now(), err: err}
			}()
			testutil.Eventually(t, 10*time.Second, "the other sidecar waits", func() bool {
				return sidecartest.Num(other.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/taken").Body["waiters"]) == 1
			})

			start := time.Now()
			f.apply(proxy)
			lost := awaitLostHolds(t, leaseEvents, "lock", "candidate")
			var gr grant
			select {
			case gr = <-granted:
			case <-time.After(30 * time.Second):
				t.Fatal("the other sidecar was never granted the lock")
			}
			if gr.err != nil || gr.r.Status != http.StatusCreated {
				t.Fatalf("the other sidecar's waiter: %v %+v", gr.err, gr.r)
			}
			acquiredAt, err := time.Parse(time.RFC3339Nano, sidecartest.Str(gr.r.Body["acquiredAt"]))
			if err != nil {
				t.Fatalf("acquiredAt: %v", err)
			}
			t.Logf("%s: lost reported %s after the cut; the lock granted elsewhere %s after the cut (answer %s); lost first by %s",
				f.name, lost.At.Sub(start).Round(time.Millisecond), acquiredAt.Sub(start).Round(time.Millisecond),
				gr.at.Sub(start).Round(time.Millisecond), acquiredAt.Sub(lost.At).Round(time.Millisecond))
			if !lost.At.Before(acquiredAt) {
				t.Errorf("the cut-off sidecar reported lost at %s, after the other sidecar was granted at %s",
					lost.At.Format(time.StampMicro), acquiredAt.Format(time.StampMicro))
			}
			newToken := sidecartest.Num(gr.r.Body["fencingToken"])
			if newToken <= token {
				t.Errorf("new token %d not above the lost one %d", newToken, token)
			}
			// The new holder writes; the former holder, paused through the cut, wakes and
			// writes with its lost token: the resource refuses it.
			if ok, _ := res.write(newToken); !ok {
				t.Error("the new holder's write was refused")
			}
			if ok, _ := res.write(token); ok {
				t.Error("a write with the lost token was accepted")
			}

			// The election: the next leader is seen (anywhere) only after lost.
			otherSub := book.subs[1]
			next := otherSub.AwaitEvent(t, 30*time.Second, "c2 sidecartest.Leads", sidecartest.Leads("c2"))
			if !lost.At.Before(next.At) {
				t.Errorf("c2 was seen leading at %s, before c1's lease was reported lost at %s",
					next.At.Format(time.StampMicro), lost.At.Format(time.StampMicro))
			}
			// The cut-off sidecar's own subscriber never saw c1 lead once it was
			// suspended or lost: its last c1 event precedes lost.
			for _, ev := range book.subs[0].Events() {
				if _, c, ok := sidecartest.EventLeader(ev.Event); ok && c == "c1" && ev.At.After(lost.At) {
					t.Errorf("the cut-off sidecar showed c1 leading at %s, after lost at %s", ev.At.Format(time.StampMicro), lost.At.Format(time.StampMicro))
				}
			}
			sidecartest.NeverLost(t, sess, "before ZooKeeper could say so")

			// Back on the network, ZooKeeper says the session expired; a new session,
			// whose subscriber sees c2 with the new term.
			proxy.Restore()
			sess.AwaitEvent(t, 20*time.Second, "lost", sidecartest.SessionEvent("lost"))
			cut.WaitReady(t)
			book.subs[0].AwaitEvent(t, 20*time.Second, "c2 sidecartest.Leads on the cut-off sidecar", sidecartest.Leads("c2"))
			cut.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+lease)
			other.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/taken?lease="+sidecartest.Str(gr.r.Body["lease"]))
			other.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/cut/candidates/c2?lease="+sidecartest.Str(c2.Body["lease"]))
			book.verify(t)
			t.Logf("session events on the cut-off sidecar: %v", sess.Names())
		})
	}
}

// awaitLostHolds reads a lease stream until it has reported one hold of each
// kind lost (`lost-hold`, and nothing but `lease` events besides), and returns
// the last of those reports.
func awaitLostHolds(t *testing.T, leaseEvents *sidecartest.EventLog, kinds ...string) sidecartest.TimedEvent {
	t.Helper()
	want := map[string]bool{}
	for _, k := range kinds {
		want[k] = true
	}
	var last sidecartest.TimedEvent
	for len(want) > 0 {
		ev := leaseEvents.AwaitEvent(t, 20*time.Second, "lost-hold", func(ev sidecartest.TimedEvent) bool { return ev.Name != "lease" })
		if ev.Name != "lost-hold" || !want[sidecartest.Str(ev.Data["kind"])] {
			t.Fatalf("lease stream: %s %v, want lost-hold of one of %v", ev.Name, ev.Data, want)
		}
		delete(want, sidecartest.Str(ev.Data["kind"]))
		last = ev
	}
	return last
}

// campaignOn enrols a candidate and returns the 201 answer.
func campaignOn(t *testing.T, car *sidecartest.Sidecar, election, id, query string) *sidecartest.Response {
	t.Helper()
	r, err := car.FaultCall(10*time.Second, http.MethodPost, fmt.Sprintf("/v1/elections/%s/candidates?id=%s&%s", election, id, query))
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("campaign %s: %v %+v", id, err, r)
	}
	return r
}
