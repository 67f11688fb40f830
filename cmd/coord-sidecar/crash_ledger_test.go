package main

// The torture's side of crash_test.go: clients that hammer a sidecar that is
// killed at random instants, a ledger of every answer they were given, and the
// checks that hold each successor to that ledger.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
)

// crashGate lets the killed sidecar's clients send requests only while a
// process of it serves and has been checked: shut before a kill (no request
// begins between the two), drained after it (the requests the kill cut have
// ended), opened once the successor is checked.
type crashGate struct {
	mu     sync.Mutex
	open   bool
	opened chan struct{} // closed when open becomes true
	busy   sync.WaitGroup
}

func newCrashGate() *crashGate { return &crashGate{open: true, opened: make(chan struct{})} }

// enter waits until the gate is open (false once stop closes); a true return
// is paired with leave.
func (g *crashGate) enter(stop <-chan struct{}) bool {
	for {
		g.mu.Lock()
		if g.open {
			g.busy.Add(1)
			g.mu.Unlock()
			return true
		}
		ch := g.opened
		g.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return false
		}
	}
}

func (g *crashGate) leave() { g.busy.Done() }

func (g *crashGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open, g.opened = false, make(chan struct{})
}

// drain waits for the requests that entered before shut to end.
func (g *crashGate) drain() { g.busy.Wait() }

func (g *crashGate) reopen() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open {
		return
	}
	g.open = true
	close(g.opened)
}

// tortureGrant is a lock grant that was answered 201, on either sidecar.
type tortureGrant struct {
	killed      bool // granted by the killed sidecar (else by the other)
	lock, lease string
	token       int64
	// answered is when the answer was read (the grant was made before);
	// ended when its end was first asked for (a release or a revoke sent,
	// or a loss counted), zero while nobody did; expires is its lease's
	// expiry as the lease's grant told it (zero: none). It was held from
	// answered to the earlier of ended and expires.
	answered, ended, expires time.Time
}

func (g *tortureGrant) end(at time.Time) {
	if g.ended.IsZero() {
		g.ended = at
	}
}

// heldUntil is the end of the span over which g was certainly held (zero:
// still held).
func (g *tortureGrant) heldUntil() time.Time {
	if !g.expires.IsZero() && (g.ended.IsZero() || g.expires.Before(g.ended)) {
		return g.expires
	}
	return g.ended
}

// tortureLease is a lease of the killed sidecar that was answered 201.
type tortureLease struct {
	id string
	// expires is the expiry the lease's grant told. Keepalives push it on
	// (counted, not relied on): a successor that kept an earlier expiry
	// than the last keepalive's would break no promise of the contract's
	// (grants, releases, revokes).
	expires time.Time
	revoked bool // a revoke was answered 204
	// gone: nothing more is asserted of it (an answer lost to a kill left its
	// state unknown, or its loss was counted once).
	gone     bool
	holds    map[string]*tortureGrant // told held, by lock name
	released map[string]bool          // told released (204), not granted again since
}

// endHolds marks every hold of l as ended at at and forgets them.
func (l *tortureLease) endHolds(at time.Time) {
	for n, g := range l.holds {
		g.end(at)
		delete(l.holds, n)
	}
}

// torture is TestCrashTorture's run: the clients of both sidecars, the ledger
// of what they were told, and what the checks found.
type torture struct {
	a, other *sidecartest.Sidecar
	client   *http.Client // the killed sidecar's clients' (its idle connections dropped at each kill)
	names    []string
	gate     *crashGate
	stop     chan struct{}
	wg       sync.WaitGroup

	mu         sync.Mutex
	leases     map[string]*tortureLease
	grants     []*tortureGrant
	acked      map[string]int // answered 2xx, by operation
	unknown    int            // requests a kill left without an answer
	violations map[string]int
	examples   []string

	sidecartest.Outcomes // unexpected answers
	kills                atomic.Int64
}

func newTorture(a, other *sidecartest.Sidecar, names []string) *torture {
	return &torture{a: a, other: other, names: names, gate: newCrashGate(), stop: make(chan struct{}),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		leases: map[string]*tortureLease{}, acked: map[string]int{}, violations: map[string]int{}}
}

// call sends one request to the killed sidecar.
func (x *torture) call(method, path string) (*sidecartest.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return sidecartest.DoWith(ctx, x.client, x.a.Base, method, path, nil)
}

// violate counts one broken promise of kind, with an example.
func (x *torture) violate(kind, example string) {
	x.violations[kind]++
	if len(x.examples) < 20 {
		x.examples = append(x.examples, kind+": "+example)
	}
}

// start launches killed clients on the killed sidecar and others on the other.
func (x *torture) start(killed, others int) {
	for c := range killed {
		x.wg.Go(func() { x.killedClient(c) })
	}
	for c := range others {
		x.wg.Go(func() { x.otherClient(c) })
	}
}

// finish stops the clients and waits for them.
func (x *torture) finish() {
	close(x.stop)
	x.wg.Wait()
}

func (x *torture) stopped() bool {
	select {
	case <-x.stop:
		return true
	default:
		return false
	}
}

// killedClient is one client of the killed sidecar: one random operation after
// another on leases of its own.
func (x *torture) killedClient(c int) {
	var mine []string
	for !x.stopped() {
		if !x.gate.enter(x.stop) {
			return
		}
		mine = x.step(c, mine)
		x.gate.leave()
	}
}

// step does one operation and returns the client's leases after it.
func (x *torture) step(c int, mine []string) []string {
	if len(mine) < 2 {
		return x.createLease(mine)
	}
	l := mine[rand.IntN(len(mine))]
	var keep bool
	switch p := rand.IntN(100); {
	case p < 55:
		keep = x.acquire(c, l)
	case p < 72:
		keep = x.release(l)
	case p < 78:
		x.revoke(l)
		keep = false
	case p < 90:
		keep = x.keepalive(l)
	default:
		if len(mine) < 4 {
			return x.createLease(mine)
		}
		keep = true
	}
	if !keep {
		mine = without(mine, l)
	}
	return mine
}

func without(list []string, s string) []string {
	out := list[:0:0]
	for _, v := range list {
		if v != s {
			out = append(out, v)
		}
	}
	return out
}

func (x *torture) createLease(mine []string) []string {
	r, err := x.call(http.MethodPost, "/v1/leases?ttl=60s")
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case err != nil:
		x.unknown++
	case r.Status == http.StatusCreated:
		id := sidecartest.Str(r.Body["lease"])
		x.leases[id] = &tortureLease{id: id, expires: parseTime(r.Body["expiresAt"]), holds: map[string]*tortureGrant{}, released: map[string]bool{}}
		x.acked["lease"]++
		return append(mine, id)
	default:
		x.Count("POST lease", r)
	}
	return mine
}

func parseTime(v any) time.Time {
	at, _ := time.Parse(time.RFC3339Nano, sidecartest.Str(v))
	return at
}

// acquire asks for a lock lease l does not hold; it reports whether the
// client keeps using l.
func (x *torture) acquire(c int, l string) bool {
	name := x.names[rand.IntN(len(x.names))]
	x.mu.Lock()
	tl := x.leases[l]
	if tl.gone || tl.holds[name] != nil {
		x.mu.Unlock()
		return !tl.gone
	}
	x.mu.Unlock()
	wait := ""
	if rand.IntN(5) == 0 {
		wait = "&wait=200ms" // a waiter, now and then, for a kill to cut
	}
	r, err := x.call(http.MethodPost, "/v1/locks/"+name+"?owner="+l+"&lease="+l+wait)
	now := time.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case err != nil:
		x.unknown++
		delete(tl.released, name) // granted or not: unknown
	case r.Status == http.StatusCreated:
		g := &tortureGrant{killed: true, lock: name, lease: l, token: sidecartest.Num(r.Body["fencingToken"]), answered: now, expires: tl.expires}
		if tl.gone { // lost meanwhile: a late grant of a lease already counted
			return false
		}
		tl.holds[name] = g
		delete(tl.released, name)
		x.grants = append(x.grants, g)
		x.acked["grant"]++
	case r.Status == http.StatusConflict, r.Status == http.StatusServiceUnavailable:
	case r.Status == http.StatusNotFound:
		return x.leaseNotFound(tl, "POST lock", r, now)
	default:
		x.Count("POST lock", r)
		x.Fail("client %d: POST /v1/locks/%s: %d %s", c, name, r.Status, r.Raw)
	}
	return true
}

// leaseNotFound records a 404 lease-not-found for tl while the ledger had it
// alive (a loss the next check would have counted: counted here, once).
func (x *torture) leaseNotFound(tl *tortureLease, op string, r *sidecartest.Response, now time.Time) bool {
	if !tl.gone && sidecartest.ProblemType(r) == "lease-not-found" && tl.expires.After(now) {
		x.violate("acknowledged leases lost (404 while serving)", tl.id+" on "+op)
		tl.endHolds(now)
	}
	tl.gone = true
	return false
}

// release releases one lock that l was told it holds.
func (x *torture) release(l string) bool {
	x.mu.Lock()
	tl := x.leases[l]
	var g *tortureGrant
	for _, h := range tl.holds {
		g = h
		break
	}
	if tl.gone || g == nil {
		x.mu.Unlock()
		return !tl.gone
	}
	g.end(time.Now())
	delete(tl.holds, g.lock)
	x.mu.Unlock()
	r, err := x.call(http.MethodDelete, "/v1/locks/"+g.lock+"?lease="+l)
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case err != nil:
		x.unknown++
	case r.Status == http.StatusNoContent:
		tl.released[g.lock] = true
		x.acked["release"]++
	case r.Status == http.StatusServiceUnavailable:
	case r.Status == http.StatusNotFound && sidecartest.ProblemType(r) == "lease-not-found":
		return x.leaseNotFound(tl, "DELETE lock", r, time.Now())
	default: // 404 not-held: a told hold lost while serving
		x.Count("DELETE lock", r)
		x.violate("acknowledged locks lost while serving", fmt.Sprintf("%s of %s: %d %s", g.lock, l, r.Status, r.Raw))
	}
	return true
}

// revoke revokes lease l, ending its holds.
func (x *torture) revoke(l string) {
	x.mu.Lock()
	tl := x.leases[l]
	if tl.gone {
		x.mu.Unlock()
		return
	}
	tl.endHolds(time.Now())
	x.mu.Unlock()
	r, err := x.call(http.MethodDelete, "/v1/leases/"+l)
	x.mu.Lock()
	defer x.mu.Unlock()
	switch {
	case err != nil:
		x.unknown++
		tl.gone = true
	case r.Status == http.StatusNoContent:
		tl.revoked = true
		x.acked["revoke"]++
	case r.Status == http.StatusNotFound:
		x.leaseNotFound(tl, "DELETE lease", r, time.Now())
	default:
		x.Count("DELETE lease", r)
		tl.gone = true
	}
}

func (x *torture) keepalive(l string) bool {
	r, err := x.call(http.MethodPost, "/v1/leases/"+l+"/keepalive")
	x.mu.Lock()
	defer x.mu.Unlock()
	tl := x.leases[l]
	switch {
	case err != nil:
		x.unknown++
	case r.Status == http.StatusOK:
		x.acked["keepalive"]++
	case r.Status == http.StatusNotFound:
		return x.leaseNotFound(tl, "keepalive", r, time.Now())
	default:
		x.Count("keepalive", r)
	}
	return !tl.gone
}

// otherClient is one client of the other sidecar, never killed: it waits for
// the same locks (up to 5 s), holds what it is granted for a moment and
// releases it.
func (x *torture) otherClient(c int) {
	owner := fmt.Sprintf("other-%d", c)
	for !x.stopped() {
		name := x.names[rand.IntN(len(x.names))]
		r, err := x.other.FaultCall(time.Minute, http.MethodPost, "/v1/locks/"+name+"?wait=5s&ttl=30s&owner="+owner)
		now := time.Now()
		if err != nil {
			x.Fail("%s: POST /v1/locks/%s: %v", owner, name, err)
			return
		}
		if r.Status != http.StatusCreated {
			if r.Status == http.StatusServiceUnavailable {
				pause(50*time.Millisecond, x.stop) // until this sidecar's session is back
			} else if r.Status != http.StatusConflict {
				x.Fail("%s: POST /v1/locks/%s: %d %s", owner, name, r.Status, r.Raw)
			}
			continue
		}
		g := &tortureGrant{lock: name, lease: sidecartest.Str(r.Body["lease"]), token: sidecartest.Num(r.Body["fencingToken"]), answered: now}
		x.mu.Lock()
		x.grants = append(x.grants, g)
		x.acked["other's grant"]++
		x.mu.Unlock()
		pause(time.Duration(rand.IntN(30))*time.Millisecond, x.stop) // the work under the lock
		x.mu.Lock()
		g.end(time.Now())
		x.mu.Unlock()
		// 404 or 503: this sidecar's own session was lost or is reconnecting,
		// not the killed one's promise.
		d, err := x.other.FaultCall(time.Minute, http.MethodDelete, "/v1/locks/"+name+"?lease="+g.lease)
		if err != nil {
			x.Fail("%s: release of %s: %v", owner, name, err)
		} else if d.Status != http.StatusNoContent && d.Status != http.StatusNotFound && d.Status != http.StatusServiceUnavailable {
			x.Fail("%s: release of %s: %d %s", owner, name, d.Status, d.Raw)
		}
	}
}

// pause waits d or until stop closes.
func pause(d time.Duration, stop <-chan struct{}) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-stop:
	}
}

// check holds the serving successor (a) to the ledger: every told lease
// answers 200 (unless its ttl passed), lists every told hold, and the lock's
// holder (as the other sidecar reads it from ZooKeeper) is that lease with
// the told token; every revoked lease answers 404; every released lock is not
// among its lease's holds. What breaks a promise is counted once and
// forgotten. The killed sidecar's clients are held at the gate meanwhile.
func (x *torture) check(t *testing.T) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	now := time.Now()
	for _, l := range x.leases {
		switch {
		case l.gone:
		case l.revoked:
			if readLease(t, x.a, l.id) != nil {
				x.violate("revoked leases back (200 after the restart)", l.id)
				l.gone = true
			}
		case l.expires.Before(now.Add(10 * time.Second)):
			l.endHolds(l.expires)
			l.gone = true
		default:
			x.checkLease(t, l, now)
		}
	}
}

func (x *torture) checkLease(t *testing.T, l *tortureLease, now time.Time) {
	t.Helper()
	held := readLease(t, x.a, l.id)
	if held == nil && !l.expires.After(time.Now()) { // ended by its TTL while the check ran
		l.endHolds(l.expires)
		l.gone = true
		return
	}
	if held == nil {
		x.violate("acknowledged leases lost (404 after the restart)", l.id)
		for n := range l.holds {
			x.violate("acknowledged locks lost with their lease", n+" of "+l.id)
		}
		l.endHolds(now)
		l.gone = true
		return
	}
	for n, g := range l.holds {
		how := holdState(t, x.other, crashHold{lease: l.id, name: n, token: g.token}, held)
		if how != "" && !l.expires.After(time.Now()) {
			// The check outlasted the lease's told expiry (a busy machine):
			// what its TTL ended was promised until then only.
			l.endHolds(l.expires)
			l.gone = true
			return
		}
		if how != "" {
			x.violate("acknowledged locks "+how, fmt.Sprintf("%s (token %d) of %s", n, g.token, l.id))
			g.end(now)
			delete(l.holds, n)
		}
	}
	for n := range l.released { // until the lease asks for it again
		if held[n] {
			x.violate("released locks back in their lease", n+" of "+l.id)
			delete(l.released, n)
		}
	}
}

// overlaps counts the grants during which the same lock was granted again:
// a later token answered before the grant's end was asked for (or its
// lease's told expiry). A grant's hold is certain from its answer to then.
// Each such grant is counted once; pairs counts them all.
func (x *torture) overlaps() (pairs int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	byLock := map[string][]*tortureGrant{}
	for _, g := range x.grants {
		byLock[g.lock] = append(byLock[g.lock], g)
	}
	for _, gs := range byLock {
		sort.Slice(gs, func(i, j int) bool { return gs[i].token < gs[j].token })
		for i, g1 := range gs {
			var first *tortureGrant
			for _, g2 := range gs[i+1:] {
				if bothHeld(g1, g2) {
					pairs++
					if first == nil {
						first = g2
					}
				}
			}
			if first != nil {
				x.violate("grants during which the lock was granted again (two holders at once)",
					fmt.Sprintf("%s: token %d (%s), then token %d (%s)", g1.lock, g1.token, side(g1), first.token, side(first)))
			}
		}
	}
	return pairs
}

// bothHeld reports whether g1 and g2 (a later token of the same lock) were
// both certainly held at one moment.
func bothHeld(g1, g2 *tortureGrant) bool {
	end1, end2 := g1.heldUntil(), g2.heldUntil()
	return g2.token > g1.token && (end1.IsZero() || g2.answered.Before(end1)) && (end2.IsZero() || g1.answered.Before(end2))
}

func side(g *tortureGrant) string {
	if g.killed {
		return "the killed sidecar's lease " + g.lease
	}
	return "the other sidecar"
}

// report logs the run's figures and fails t on any broken promise.
func (x *torture) report(t *testing.T, startKills, pairs int) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	var acked []string
	total := 0
	for op, n := range x.acked {
		acked = append(acked, fmt.Sprintf("%d %s", n, op))
		total += n
	}
	sort.Strings(acked)
	t.Logf("%d kills (%d of them during a successor's start); %d acknowledged operations (%s); %d requests cut by a kill; %d pairs of grants of one lock held at once",
		x.kills.Load(), startKills, total, strings.Join(acked, ", "), x.unknown, pairs)
	answers, failures := x.Snapshot()
	if len(answers) > 0 {
		t.Logf("other answers: %s", strings.Join(answers, ", "))
	}
	for _, f := range failures {
		t.Error(f)
	}
	if len(x.violations) == 0 {
		return
	}
	var kinds []string
	for k, n := range x.violations {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(kinds)
	t.Errorf("%d kills, %d acknowledged operations: promises broken: %s\nfirst ones:\n%s",
		x.kills.Load(), total, strings.Join(kinds, "; "), strings.Join(x.examples, "\n"))
}
