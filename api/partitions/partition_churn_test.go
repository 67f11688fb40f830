package partitions_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// fence is the outside resource the workers write to: per partition it keeps
// the highest fencing token seen and refuses any lower one.
type fence struct {
	mu      sync.Mutex
	highest map[string]int64
	holder  map[int64]string // token → member that used it
	refused []string
	shared  []string // one token used by two members
}

func newFence() *fence { return &fence{highest: map[string]int64{}, holder: map[int64]string{}} }

func (f *fence) write(partition, member string, token int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.holder[token]; ok && h != member {
		f.shared = append(f.shared, fmt.Sprintf("token %d used by %s and %s", token, h, member))
	}
	f.holder[token] = member
	if token < f.highest[partition] {
		f.refused = append(f.refused, fmt.Sprintf("%s wrote %s with %d below %d", member, partition, token, f.highest[partition]))
		return false
	}
	f.highest[partition] = token
	return true
}

// belief is a span during which a worker held itself the owner of a partition.
type belief struct {
	member     string
	token      int64
	start, end time.Time
}

// pWorker is a worker: it follows its member by long-polls, works (writes to
// the fence) only on what it owns, and acks as soon as it owns something the
// plan no longer deals it.
type pWorker struct {
	car              *sidecartest.Sidecar
	group, id, lease string
	fence            *fence
	wait             string // of the long-polls

	mu      sync.Mutex
	open    map[string]belief // partition → current belief
	closed  map[string][]belief
	stopped bool
	cut     time.Time // set when its ownership was taken from outside (revoke, kill)

	stop chan struct{}
	done chan struct{}
}

func startWorker(t testing.TB, car *sidecartest.Sidecar, group, id string, f *fence) *pWorker {
	return startWorkerWaiting(t, car, group, id, f, "100ms")
}

// startWorkerWaiting starts a worker whose long-polls wait up to wait.
func startWorkerWaiting(t testing.TB, car *sidecartest.Sidecar, group, id string, f *fence, wait string) *pWorker {
	t.Helper()
	r := car.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/"+group+"/members?ttl=60s&id="+id, "")
	m := sidecartest.DecodeAs[sidecartest.PMember](t, r.Raw)
	w := &pWorker{car: car, group: group, id: id, lease: m.Lease, fence: f, wait: wait, open: map[string]belief{}, closed: map[string][]belief{},
		stop: make(chan struct{}), done: make(chan struct{})}
	w.see(m.OwnedTokens())
	go w.run(m.Version)
	return w
}

// see makes the worker's beliefs those of owned.
func (w *pWorker) see(owned map[string]int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for p, b := range w.open {
		if tok, ok := owned[p]; !ok || tok != b.token {
			w.endLocked(p, now)
		}
	}
	if w.stopped {
		return
	}
	for p, tok := range owned {
		if _, ok := w.open[p]; !ok {
			w.open[p] = belief{member: w.id, token: tok, start: now}
		}
	}
}

func (w *pWorker) endLocked(p string, at time.Time) {
	b := w.open[p]
	b.end = at
	w.closed[p] = append(w.closed[p], b)
	delete(w.open, p)
}

// halt ends every belief now (the worker stops working) and the loop.
func (w *pWorker) halt() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.see(nil)
	close(w.stop)
	<-w.done
}

// work writes every owned partition to the fence.
func (w *pWorker) work() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for p, b := range w.open {
		w.fence.write(p, w.id, b.token)
	}
}

func (w *pWorker) run(version int64) {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { <-w.stop; cancel() }()
	for ctx.Err() == nil {
		w.work()
		r, err := w.car.Do(ctx, http.MethodGet, fmt.Sprintf("/v1/partitions/%s/members/%s?version=%d&wait=%s", w.group, w.id, version, w.wait), nil)
		if err != nil || r.Status != http.StatusOK {
			w.see(nil) // told nothing is owned (or cannot tell): stop work
			if err == nil && r.Status == http.StatusNotFound {
				return
			}
			version = 0
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		var m sidecartest.PMember
		if json.Unmarshal(r.Raw, &m) != nil {
			w.see(nil)
			continue
		}
		owned := m.OwnedTokens()
		stale := false
		for p := range owned {
			if !containsStr(m.Assigned, p) {
				stale = true
				delete(owned, p) // stop work on it before the ack
			}
		}
		w.see(owned)
		version = m.Version
		if stale {
			r, err := w.car.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/partitions/%s/members/%s/ack?version=%d&lease=%s", w.group, w.id, m.Version, w.lease), nil)
			if err == nil && r.Status == http.StatusOK && json.Unmarshal(r.Raw, &m) == nil {
				w.see(m.OwnedTokens())
				version = m.Version
			}
		}
	}
}

func containsStr(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// checkBeliefs checks that no two workers ever held one partition at once:
// their spans (cut where ownership was taken from outside) never overlap.
func checkBeliefs(t *testing.T, workers []*pWorker) int {
	t.Helper()
	all := map[string][]belief{}
	for _, w := range workers {
		w.mu.Lock()
		for p, bs := range w.closed {
			for _, b := range bs {
				if !w.cut.IsZero() && b.end.After(w.cut) {
					b.end = w.cut
				}
				all[p] = append(all[p], b)
			}
		}
		for p, b := range w.open {
			b.end = time.Now()
			if !w.cut.IsZero() {
				b.end = w.cut
			}
			all[p] = append(all[p], b)
		}
		w.mu.Unlock()
	}
	n := 0
	for p, bs := range all {
		sort.Slice(bs, func(i, j int) bool { return bs[i].start.Before(bs[j].start) })
		for i := 1; i < len(bs); i++ {
			prev, cur := bs[i-1], bs[i]
			n++
			if cur.member != prev.member && cur.start.Before(prev.end) {
				t.Errorf("partition %s: %s (token %d) from %s while %s (token %d) held it until %s", p,
					cur.member, cur.token, cur.start.Format("15:04:05.000"), prev.member, prev.token, prev.end.Format("15:04:05.000"))
			}
			if cur.member != prev.member && cur.token <= prev.token {
				t.Errorf("partition %s: %s's token %d not above %s's %d", p, cur.member, cur.token, prev.member, prev.token)
			}
		}
	}
	return n
}

// Churn across two sidecars (members joining, leaving, revoked, one sidecar
// killed) with a fenced resource: no two members ever own one partition, the
// fence never refuses a live member, and every partition has an owner again
// within 2s of the churn's end (plus the killed sidecar's session timeout).
func TestPartitionsChurn(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	p, cmd := sidecartest.StartKillable(t, zkc.Server(0), root)

	const g = "churn"
	f := newFence()
	a.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/"+g, `{"count":24}`)
	ws := map[string]*pWorker{}
	var all []*pWorker
	add := func(car *sidecartest.Sidecar, id string) {
		w := startWorker(t, car, g, id, f)
		ws[id] = w
		all = append(all, w)
	}
	add(a, "a1")
	add(p, "p1")
	add(a, "a2")
	add(p, "p2")
	sidecartest.AwaitSettled(t, a, g, 4, 5*time.Second)

	// Churn, step after step without waiting for the group to settle.
	add(a, "a3")
	ws["p1"].halt()
	p.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/partitions/"+g+"/members/p1?lease="+ws["p1"].lease)
	add(p, "p3")
	w := ws["a2"]
	w.mu.Lock()
	w.cut = time.Now() // revoked from outside: whatever it believes after this is fenced
	w.mu.Unlock()
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+w.lease)
	add(a, "a4")
	ws["a1"].halt()
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/partitions/"+g+"/members/a1?lease="+ws["a1"].lease)
	kill := time.Now()
	for _, id := range []string{"p2", "p3"} {
		ws[id].mu.Lock()
		ws[id].cut = kill
		ws[id].mu.Unlock()
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	end := time.Now()

	// Live: a3, a4. Bound: 2s after the churn, plus the killed session's 1s
	// timeout (expiry runs in ticks of 200ms).
	bound := 2*time.Second + time.Second + 200*time.Millisecond
	sidecartest.AwaitSettled(t, a, g, 2, bound)
	took := time.Since(end)
	t.Logf("every partition owned again %s after the churn ended (bound %s)", took.Round(time.Millisecond), bound)
	testutil.Eventually(t, 5*time.Second, "the live workers own all 24", func() bool {
		ws["a3"].mu.Lock()
		ws["a4"].mu.Lock()
		n := len(ws["a3"].open) + len(ws["a4"].open)
		ws["a4"].mu.Unlock()
		ws["a3"].mu.Unlock()
		return n == 24
	})
	for _, w := range all {
		select {
		case <-w.stop:
		default:
			w.halt()
		}
	}
	spans := checkBeliefs(t, all)
	f.mu.Lock()
	defer f.mu.Unlock()
	live := 0
	for _, r := range f.refused {
		t.Logf("fenced: %s", r)
		for _, id := range []string{"a3", "a4", "a1", "p1"} {
			if len(r) > len(id) && r[:len(id)+1] == id+" " {
				live++
			}
		}
	}
	if live > 0 || len(f.shared) > 0 {
		t.Fatalf("the fence refused %d writes of members that were not cut off; shared tokens: %v", live, f.shared)
	}
	t.Logf("%d handovers checked, %d stale writes refused by the fence (revoked or killed members)", spans, len(f.refused))
}
