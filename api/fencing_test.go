package api_test

// The lock safety checker of issue 6 (docs/RELIABILITY.md): many clients on three
// sidecars take one lock and write to a fenced resource, and the history of grants
// and releases is checked with porcupine against a sequential model of a lock with
// fencing tokens. The same workload runs without faults here and under ZooKeeper
// faults in faults_test.go.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// ---------------------------------------------------------------------------
// The fenced resource.

// fencedResource stands for the storage a lock protects: it remembers the
// highest fencing token it has seen and rejects any write carrying a lower one,
// as a real store would with a conditional write. It counts what it accepts and
// rejects.
type fencedResource struct {
	mu       sync.Mutex
	highest  int64
	accepted int
	rejected int
}

// write applies a write made under token. It reports whether it was accepted and
// the highest token seen before it.
func (r *fencedResource) write(token int64) (ok bool, before int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	before = r.highest
	if token < r.highest {
		r.rejected++
		return false, before
	}
	r.highest = token
	r.accepted++
	return true, before
}

// ---------------------------------------------------------------------------
// The model porcupine checks.

// lockOp is one operation of the lock's history, as a client saw it.
//
//   - "acquire": a grant (201) of Token to Client, between the request and the
//     answer.
//   - "release": a release (204) of that grant.
//   - "lost": a grant the sidecar later reported gone (the release answered 404:
//     the lease ended with its session). The lock was freed at some moment between
//     the grant's answer and that 404, so the operation spans that interval.
//   - "unknown": a release whose answer never came (or 503): the lock may be freed
//     at any moment after the request, so the operation never returns.
//
// Requests that were not granted (409, 503) change nothing and are left out.
type lockOp struct {
	Kind   string
	Client int
	Token  int64
}

// lockState is the model's state: who holds the lock (-1: nobody) and the
// highest fencing token granted so far.
type lockState struct {
	Holder int
	Token  int64
}

// lockModel is the sequential specification of a fair lock with fencing tokens.
// A history is linearizable against it if and only if there is one order of the
// operations, each placed at a point within its call..return interval, in which
//   - a grant happens only while nobody holds the lock (no overlapping grants),
//   - every grant carries a token above every earlier grant's (tokens strictly
//     increase in grant order, which is what a fenced resource relies on),
//   - only the holder releases, and releases exactly the grant it holds.
//
// porcupine searches for such an order; Illegal means none exists: two clients
// held the lock at once, or a later holder got a lower token.
var lockModel = porcupine.Model{
	Init: func() any { return lockState{Holder: -1} },
	Step: func(state, input, _ any) (bool, any) {
		st, op := state.(lockState), input.(lockOp)
		if op.Kind == "acquire" {
			if st.Holder != -1 || op.Token <= st.Token {
				return false, st
			}
			return true, lockState{Holder: op.Client, Token: op.Token}
		}
		if st.Holder != op.Client || st.Token != op.Token {
			return false, st
		}
		return true, lockState{Holder: -1, Token: st.Token}
	},
	Equal: func(a, b any) bool { return a.(lockState) == b.(lockState) },
	DescribeOperation: func(input, _ any) string {
		op := input.(lockOp)
		return fmt.Sprintf("%s(client %d, token %d)", op.Kind, op.Client, op.Token)
	},
	DescribeState: func(state any) string {
		st := state.(lockState)
		if st.Holder < 0 {
			return fmt.Sprintf("free (last token %d)", st.Token)
		}
		return fmt.Sprintf("client %d holds token %d", st.Holder, st.Token)
	},
}

// lockHistory records lock operations with monotonic timestamps.
type lockHistory struct {
	start time.Time
	mu    sync.Mutex
	ops   []porcupine.Operation
}

func newLockHistory() *lockHistory { return &lockHistory{start: time.Now()} }

// never is the return time of an operation whose outcome never came.
const never = math.MaxInt64

func (h *lockHistory) add(kind string, client int, token int64, call time.Time, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{
		ClientId: client,
		Input:    lockOp{Kind: kind, Client: client, Token: token},
		Call:     call.Sub(h.start).Nanoseconds(),
		Return:   ret,
	})
}

func (h *lockHistory) since(t time.Time) int64 { return t.Sub(h.start).Nanoseconds() }

// check runs porcupine over the history and fails the test unless it is
// linearizable; on failure it writes porcupine's visualization to a file kept
// after the test and names it.
func (h *lockHistory) check(t testing.TB) {
	t.Helper()
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(lockModel, ops, 2*time.Minute)
	t.Logf("porcupine: %d operations checked in %s: %s", len(ops), time.Since(start).Round(time.Millisecond), res)
	if res == porcupine.Ok {
		return
	}
	file := filepath.Join(os.TempDir(), fmt.Sprintf("lock-history-%s-%d.html", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano()))
	if err := porcupine.VisualizePath(lockModel, info, file); err != nil {
		t.Logf("visualization: %v", err)
	}
	t.Fatalf("the lock history is %s against the lock model (overlapping grants or a token that did not increase); see %s", res, file)
}

// The checker is not vacuous: it accepts correct histories and rejects
// overlapping grants and fencing tokens that go backwards.
func TestLockModelRejectsOverlapsAndStaleTokens(t *testing.T) {
	ms := func(n int64) int64 { return n * int64(time.Millisecond) }
	op := func(kind string, client int, token, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: lockOp{kind, client, token}, Call: ms(call), Return: ret}
	}
	cases := []struct {
		name string
		ops  []porcupine.Operation
		want porcupine.CheckResult
	}{
		{"sequential grants", []porcupine.Operation{
			op("acquire", 0, 10, 0, ms(1)), op("release", 0, 10, 2, ms(3)),
			op("acquire", 1, 20, 1, ms(4)), op("release", 1, 20, 5, ms(6)),
		}, porcupine.Ok},
		{"overlapping grants", []porcupine.Operation{
			op("acquire", 0, 10, 0, ms(1)), op("acquire", 1, 20, 2, ms(3)),
			op("release", 0, 10, 4, ms(5)), op("release", 1, 20, 6, ms(7)),
		}, porcupine.Illegal},
		{"token goes backwards", []porcupine.Operation{
			op("acquire", 0, 20, 0, ms(1)), op("release", 0, 20, 2, ms(3)),
			op("acquire", 1, 10, 4, ms(5)), op("release", 1, 10, 6, ms(7)),
		}, porcupine.Illegal},
		{"lost grant frees the lock before its 404", []porcupine.Operation{
			op("acquire", 0, 10, 0, ms(1)), op("lost", 0, 10, 1, ms(9)),
			op("acquire", 1, 20, 2, ms(3)), op("release", 1, 20, 4, ms(5)),
		}, porcupine.Ok},
		{"unknown release may free the lock later", []porcupine.Operation{
			op("acquire", 0, 10, 0, ms(1)), op("unknown", 0, 10, 2, never),
			op("acquire", 1, 20, 3, ms(4)), op("release", 1, 20, 5, ms(6)),
		}, porcupine.Ok},
		{"grant while the holder has not released", []porcupine.Operation{
			op("acquire", 0, 10, 0, ms(1)), op("acquire", 1, 20, 2, ms(3)),
			op("release", 1, 20, 4, ms(5)), op("release", 0, 10, 6, ms(7)),
		}, porcupine.Illegal},
	}
	for _, c := range cases {
		if got := porcupine.CheckOperationsTimeout(lockModel, c.ops, 10*time.Second); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// ---------------------------------------------------------------------------
// The workload.

// lockWorkload: clients spread over sidecars take one lock in a loop until
// target grants were made (or the deadline passes), each writing to the fenced
// resource while it holds the lock.
type lockWorkload struct {
	cars    []*sidecartest.Sidecar
	lock    string
	clients int
	target  int64
	// wait is the acquire's wait=; timeout bounds every request (a request without
	// an answer within it is a failure).
	wait, timeout time.Duration
	deadline      time.Time

	hist *lockHistory
	res  fencedResource

	granted, notGranted, unavailable atomic.Int64
	lost, unknownReleases            atomic.Int64
	staleRejected, staleAccepted     atomic.Int64
	holdRejected                     atomic.Int64 // in-hold writes of grants the sidecar reported lost

	sidecartest.Outcomes
}

// start launches the clients; the returned channel closes when all have ended.
func (w *lockWorkload) start(stop <-chan struct{}) <-chan struct{} {
	if w.hist == nil {
		w.hist = newLockHistory()
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for c := range w.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.client(c, stop)
		}()
	}
	go func() { wg.Wait(); close(done) }()
	return done
}

// client is client c's loop: acquire, work under the lock, release, until the
// target, the deadline or stop; a request without an answer ends it.
func (w *lockWorkload) client(c int, stop <-chan struct{}) {
	car := w.cars[c%len(w.cars)]
	acquire := fmt.Sprintf("/v1/locks/%s?wait=%s&ttl=10s&owner=client-%d", w.lock, w.wait, c)
	backoff := func() bool {
		t := time.NewTimer(time.Duration(20+rand.IntN(60)) * time.Millisecond)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	}
	for w.granted.Load() < w.target && time.Now().Before(w.deadline) {
		select {
		case <-stop:
			return
		default:
		}
		call := time.Now()
		r, err := car.FaultCall(w.timeout, http.MethodPost, acquire)
		if err != nil {
			// No answer: the one outcome the contract does not allow.
			w.Fail("client %d: acquire: %v", c, err)
			return
		}
		w.Count("POST", r)
		switch r.Status {
		case http.StatusCreated:
		case http.StatusConflict:
			w.notGranted.Add(1)
			continue
		case http.StatusServiceUnavailable:
			w.unavailable.Add(1)
			if !backoff() {
				return
			}
			continue
		default:
			w.Fail("client %d: acquire answered %d: %s", c, r.Status, r.Raw)
			return
		}
		if !w.holdAndRelease(c, car, r, call) {
			return
		}
	}
}

// holdAndRelease records client c's grant r (asked for at call), writes to the
// fenced resource under it and releases it. It reports whether the client
// goes on.
func (w *lockWorkload) holdAndRelease(c int, car *sidecartest.Sidecar, r *sidecartest.Response, call time.Time) bool {
	token, lease := sidecartest.Num(r.Body["fencingToken"]), sidecartest.Str(r.Body["lease"])
	granted := time.Now()
	w.hist.add("acquire", c, token, call, w.hist.since(granted))
	w.granted.Add(1)

	// Work under the lock: a first write, a stale write replaying the previous
	// holder's token (a paused former holder waking up), some work, a last write.
	first, before := w.res.write(token)
	if first && before > 0 && before < token {
		if ok, _ := w.res.write(before); ok {
			w.staleAccepted.Add(1)
		} else {
			w.staleRejected.Add(1)
		}
	}
	runtimeWork()
	last, _ := w.res.write(token)
	fenced := !first || !last

	relCall := time.Now()
	d, err := car.FaultCall(w.timeout, http.MethodDelete, "/v1/locks/"+w.lock+"?lease="+lease)
	switch {
	case err != nil:
		w.Fail("client %d: release of token %d: %v", c, token, err)
		w.hist.add("unknown", c, token, relCall, never)
		w.unknownReleases.Add(1)
		return false
	case d.Status == http.StatusNoContent:
		w.hist.add("release", c, token, relCall, w.hist.since(time.Now()))
		if fenced {
			// The sidecar still counted this grant as held while the resource
			// had seen a higher token: two holders at once, or a stale token.
			w.Fail("client %d: token %d was fenced off while the sidecar still reported it held", c, token)
		}
	case d.Status == http.StatusNotFound:
		// The lease ended (its session was lost): the grant ended at some
		// moment between its answer and now.
		w.hist.add("lost", c, token, granted, w.hist.since(time.Now()))
		w.lost.Add(1)
		if fenced {
			w.holdRejected.Add(1)
		}
	case d.Status == http.StatusServiceUnavailable:
		w.hist.add("unknown", c, token, relCall, never)
		w.unknownReleases.Add(1)
	default:
		w.Fail("client %d: release answered %d: %s", c, d.Status, d.Raw)
		w.hist.add("unknown", c, token, relCall, never)
		return false
	}
	w.Count("DELETE", d)
	return true
}

// runtimeWork stands for the work done under the lock: up to half a millisecond.
func runtimeWork() { time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond) }

// verify checks the run's outcome: every request answered, the target reached,
// no stale token accepted, and the history linearizable.
func (w *lockWorkload) verify(t *testing.T) {
	t.Helper()
	answers, failures := w.Snapshot()
	w.res.mu.Lock()
	accepted, rejected := w.res.accepted, w.res.rejected
	w.res.mu.Unlock()
	t.Logf("%d grants (target %d), %d not granted (409), %d unavailable (503), %d grants reported lost, %d releases without an answer",
		w.granted.Load(), w.target, w.notGranted.Load(), w.unavailable.Load(), w.lost.Load(), w.unknownReleases.Load())
	t.Logf("fenced resource: %d writes accepted, %d rejected (%d stale replays rejected, %d accepted; %d in-hold writes of lost grants rejected)",
		accepted, rejected, w.staleRejected.Load(), w.staleAccepted.Load(), w.holdRejected.Load())
	t.Logf("answers: %s", strings.Join(answers, ", "))
	for _, f := range failures {
		t.Error(f)
	}
	if n := w.staleAccepted.Load(); n != 0 {
		t.Errorf("%d writes with a stale fencing token were accepted", n)
	}
	if g := w.granted.Load(); g < w.target {
		t.Errorf("only %d grants of %d before the deadline", g, w.target)
	}
	w.hist.check(t)
}

// Three sidecars, 24 clients, 600 grants of one lock with no fault: no overlapping
// grants (porcupine), fencing tokens strictly increasing, stale writes rejected.
func TestFencedLockNoFault(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	var cars []*sidecartest.Sidecar
	for range 3 {
		cars = append(cars, sidecartest.Start(t, zkc.Servers(), root))
	}
	w := &lockWorkload{cars: cars, lock: "fenced", clients: 24, target: 600,
		wait: 10 * time.Second, timeout: 30 * time.Second, deadline: time.Now().Add(2 * time.Minute)}
	stop := make(chan struct{})
	defer close(stop)
	select {
	case <-w.start(stop):
	case <-time.After(3 * time.Minute):
		t.Fatal("the workload did not end")
	}
	w.verify(t)
	if w.lost.Load() != 0 || w.unavailable.Load() != 0 {
		t.Errorf("without faults: %d grants lost, %d answers 503", w.lost.Load(), w.unavailable.Load())
	}
	if w.staleRejected.Load() == 0 {
		t.Error("no stale write was ever replayed: the fence was not exercised")
	}
}
