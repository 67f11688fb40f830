package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// A sidecar killed with SIGKILL and started again on the same --state-dir
// keeps, on one lease, a semaphore permit, a read and a write grant of two
// read/write locks, and two candidacies of one election (the leader and a
// follower), checked after the old process's session timeout: the same
// permit, fencing tokens, leader and term. Another sidecar's waiters are not
// granted meanwhile and its election stream never shows another leader or
// term; the requests that were waiting on the killed sidecar leave no node
// behind (the semaphore's internal mutex included). Released through the
// successor, each thing passes on. On a 3-node ensemble.
func TestRestartKeepsPermitsRWLocksAndCandidacies(t *testing.T) {
	r, a, b, lease := restartOnEnsemble(t)
	k := &keptLines{a: a, b: b, lease: lease, granted: map[string]chan *sidecartest.Response{}}
	k.hold(t)
	k.wait(t)
	k.events = sidecartest.FollowEvents(t, k.b, "/v1/elections/kept/events")
	testutil.Eventually(t, 10*time.Second, "the lease and its holds saved", func() bool {
		st := r.savedState(t)
		return strings.Contains(st, k.lease) && strings.Count(st, `"kind":"semaphore"`) == 1 &&
			strings.Count(st, `"kind":"rwlock"`) == 2 && strings.Count(st, `"kind":"candidate"`) == 2
	})

	k.a, _ = r.restartPastTimeout(t)

	k.checkKept(t)
	k.release(t)
}

// keptLines is what TestRestartKeepsPermitsRWLocksAndCandidacies keeps: a
// sidecar a (restarted) whose lease holds permit of semaphore kept, kept-w in
// write mode, kept-r in read mode and candidates a1 (the leader, in term) and
// a2 (a follower) of election kept; another sidecar b with its candidate b1
// and its waiters (granted, by what they wait for) and a stream of the
// election (events).
type keptLines struct {
	a, b                  *sidecartest.Sidecar
	lease, permit         string
	writeToken, readToken int64
	readSince             string
	term                  int64
	granted               map[string]chan *sidecartest.Response
	events                *sidecartest.EventLog
}

// hold takes everything the lease keeps, and enrols b1 between a1 and a2.
func (k *keptLines) hold(t *testing.T) {
	t.Helper()
	a, b := k.a, k.b
	k.permit = sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/kept/permits?max=1&owner=a&lease="+k.lease).Body["permit"])
	k.writeToken = sidecartest.Num(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/kept-w?mode=write&owner=a&lease="+k.lease).Body["fencingToken"])
	k.readToken = sidecartest.Num(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/kept-r?mode=read&owner=a&lease="+k.lease).Body["fencingToken"])
	// Through a, whose session took the read lock: b's server may not have
	// applied it yet.
	k.readSince = sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/kept-r").Body["readers"].([]any)[0].(map[string]any)["since"])
	led := a.Must(t, http.StatusCreated, http.MethodPost, "/v1/elections/kept/candidates?id=a1&lease="+k.lease).Body
	k.term = sidecartest.Num(led["term"])
	if led["leader"] != true || k.term == 0 {
		t.Fatalf("candidate a1 of an empty election: %v; want it leading with a term", led)
	}
	b.Must(t, http.StatusCreated, http.MethodPost, "/v1/elections/kept/candidates?id=b1&ttl=60s")
	if f := a.Must(t, http.StatusCreated, http.MethodPost, "/v1/elections/kept/candidates?id=a2&lease="+k.lease).Body; f["leader"] != false {
		t.Fatalf("candidate a2 behind a1 and b1: %v; want a follower", f)
	}
}

// waiters is the number of waiters b sees for the semaphore or lock at path.
func (k *keptLines) waiters(t *testing.T, path string) int64 {
	t.Helper()
	return sidecartest.Num(k.b.Must(t, http.StatusOK, http.MethodGet, path).Body["waiters"])
}

// bWaits sends b's request path, waiting for what, in the background.
func (k *keptLines) bWaits(what, path string) {
	ch := make(chan *sidecartest.Response, 1)
	k.granted[what] = ch
	go func() {
		resp, err := k.b.FaultCall(2*time.Minute, http.MethodPost, path)
		if err != nil {
			resp = &sidecartest.Response{Status: -1, Raw: []byte(err.Error())}
		}
		ch <- resp
	}()
}

// wait starts the waiters: b's for the permit and both locks, and requests of
// another lease on a (the killed sidecar) for the permit, kept-w and the
// election.
func (k *keptLines) wait(t *testing.T) {
	t.Helper()
	// b's waiter first, so that it holds the semaphore's internal mutex and
	// a's waits behind it there.
	k.bWaits("semaphore", "/v1/semaphores/kept/permits?max=1&wait=100s&owner=b")
	testutil.Eventually(t, 10*time.Second, "the other sidecar waiting for a permit", func() bool {
		return k.waiters(t, "/v1/semaphores/kept") == 1
	})
	k.bWaits("write lock", "/v1/rwlocks/kept-w?mode=write&wait=100s&owner=b")
	k.bWaits("read lock", "/v1/rwlocks/kept-r?mode=write&wait=100s&owner=b")
	waiting := sidecartest.Str(k.a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	for _, path := range []string{
		"/v1/semaphores/kept/permits?max=1&wait=50s&lease=",
		"/v1/rwlocks/kept-w?mode=read&wait=50s&lease=",
		"/v1/elections/kept/candidates?id=aw&wait=50s&lease=",
	} {
		go func() { _, _ = k.a.FaultCall(time.Minute, http.MethodPost, path+waiting) }()
	}
	testutil.Eventually(t, 10*time.Second, "a waiter on each sidecar", func() bool {
		return k.waiters(t, "/v1/semaphores/kept") == 2 && k.waiters(t, "/v1/rwlocks/kept-w") == 2 && k.waiters(t, "/v1/rwlocks/kept-r") == 1 &&
			len(k.b.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/kept").Body["candidates"].([]any)) == 4
	})
}

// checkKept checks, after the restart, that the lease holds everything as
// before and that b saw no change and was granted nothing.
func (k *keptLines) checkKept(t *testing.T) {
	t.Helper()
	detail := string(k.a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+k.lease).Raw)
	for _, hold := range []string{
		`"kind":"semaphore","name":"kept"`, `"kind":"rwlock","name":"kept-w"`, `"kind":"rwlock","name":"kept-r"`,
		`"kind":"candidate","name":"kept/a1"`, `"kind":"candidate","name":"kept/a2"`,
	} {
		if !strings.Contains(detail, hold) {
			t.Fatalf("the resumed lease %s: %s; want it holding %s", k.lease, detail, hold)
		}
	}
	k.checkLines(t)
	for _, ev := range k.events.Events() {
		if got := electionLine(ev.Data); !strings.HasPrefix(got, fmt.Sprintf("a1@%d ", k.term)) {
			t.Errorf("the other sidecar's stream showed %q; want a1 leading in term %d throughout", got, k.term)
		}
	}
	for what, ch := range k.granted {
		select {
		case resp := <-ch:
			t.Errorf("the other sidecar's waiter for the %s answered while it was kept: %d %s", what, resp.Status, resp.Raw)
		default:
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	// The adopted candidacy answers as before: a1 sidecartest.Leads in its term.
	if c := k.a.Send(t, http.StatusOK, http.MethodPut, "/v1/elections/kept/candidates/a1?lease="+k.lease, `{"value":"again"}`).Body; c["leader"] != true || sidecartest.Num(c["term"]) != k.term {
		t.Fatalf("proclaim through the successor: %v; want a1 leading in term %d", c, k.term)
	}
}

// checkLines checks each line as b sees it: the lease's nodes where they were,
// b's waiters alone behind them.
func (k *keptLines) checkLines(t *testing.T) {
	t.Helper()
	b := k.b
	sem := b.Must(t, http.StatusOK, http.MethodGet, "/v1/semaphores/kept").Body
	if hs, _ := sem["holders"].([]any); len(hs) != 1 || sidecartest.Str(hs[0].(map[string]any)["permit"]) != k.permit || sidecartest.Num(sem["waiters"]) != 1 {
		t.Errorf("after the restart the other sidecar sees semaphore %v; want permit %s alone and 1 waiter (its own: the killed sidecar's mutex node is gone)", sem, k.permit)
	}
	w := b.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/kept-w").Body
	if writer, _ := w["writer"].(map[string]any); sidecartest.Num(writer["fencingToken"]) != k.writeToken || sidecartest.Str(writer["owner"]) != "a" || sidecartest.Num(w["waiters"]) != 1 {
		t.Errorf("after the restart the other sidecar sees read/write lock %v; want writer a with token %d and 1 waiter (its own)", w, k.writeToken)
	}
	rd := b.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/kept-r").Body
	if rs, _ := rd["readers"].([]any); len(rs) != 1 || sidecartest.Str(rs[0].(map[string]any)["owner"]) != "a" || !sinceOfTheGrant(rs[0].(map[string]any)["since"], k.readSince) || sidecartest.Num(rd["waiters"]) != 1 {
		t.Errorf("after the restart the other sidecar sees read/write lock %v; want reader a since its grant (%s; its node made then) and 1 waiter", rd, k.readSince)
	}
	el := b.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/kept").Body
	if got := electionLine(el); got != fmt.Sprintf("a1@%d a1 b1 a2", k.term) {
		t.Errorf("after the restart the other sidecar sees election %q; want a1 leading in term %d, then b1, a2 (aw's node gone)", got, k.term)
	}
}

// release lets everything go through the successor and checks that each
// thing passes on to b.
func (k *keptLines) release(t *testing.T) {
	t.Helper()
	a := k.a
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/semaphores/kept/permits/"+k.permit+"?lease="+k.lease)
	if resp := <-k.granted["semaphore"]; resp.Status != http.StatusCreated || sidecartest.Str(resp.Body["permit"]) == k.permit {
		t.Errorf("after the release the semaphore's waiter got %d %s; want a permit of its own", resp.Status, resp.Raw)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/rwlocks/kept-w?mode=write&lease="+k.lease)
	if resp := <-k.granted["write lock"]; resp.Status != http.StatusCreated || sidecartest.Num(resp.Body["fencingToken"]) <= k.writeToken {
		t.Errorf("after the release the writer waiting for kept-w got %d %s; want the lock with a token above %d", resp.Status, resp.Raw, k.writeToken)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/rwlocks/kept-r?mode=read&lease="+k.lease)
	if resp := <-k.granted["read lock"]; resp.Status != http.StatusCreated || sidecartest.Num(resp.Body["fencingToken"]) <= k.readToken {
		t.Errorf("after the release the writer waiting for kept-r got %d %s; want the lock with a token above %d", resp.Status, resp.Raw, k.readToken)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/kept/candidates/a1?lease="+k.lease)
	ev := k.events.AwaitEvent(t, 10*time.Second, "b1 leading", func(ev sidecartest.TimedEvent) bool {
		return strings.HasPrefix(electionLine(ev.Data), "b1@")
	})
	if got := electionLine(ev.Data); !strings.HasSuffix(got, " b1 a2") || sidecartest.Num(ev.Data["leader"].(map[string]any)["term"]) <= k.term {
		t.Errorf("after a1 resigned the other sidecar's stream showed %q; want b1 leading in a term above %d, a2 still a candidate", got, k.term)
	}
}

// electionLine renders an election's body (GET or event) as
// "<leader>@<term> <candidate> <candidate>...", "-" for no leader.
func electionLine(body map[string]any) string {
	out := "-"
	if l, ok := body["leader"].(map[string]any); ok {
		out = fmt.Sprintf("%s@%d", sidecartest.Str(l["candidate"]), sidecartest.Num(l["term"]))
	}
	cs, _ := body["candidates"].([]any)
	for _, c := range cs {
		m, _ := c.(map[string]any)
		out += " " + sidecartest.Str(m["candidate"])
	}
	return out
}

// sinceOfTheGrant tells whether since, a holder's as another sidecar shows it,
// dates the grant the granting sidecar dated at granted: the same instant, or
// (another sidecar first seeing it held) its node's creation, the same
// millisecond or up to a second before (ZooKeeper keeps no grant time).
func sinceOfTheGrant(since any, granted string) bool {
	s, err1 := time.Parse(time.RFC3339Nano, sidecartest.Str(since))
	g, err2 := time.Parse(time.RFC3339Nano, granted)
	return err1 == nil && err2 == nil && !s.After(g) && g.Sub(s) < time.Second
}
