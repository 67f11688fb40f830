package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func TestDelayedNamesRoundTrip(t *testing.T) {
	due := time.UnixMilli(1764331200123)
	tok := newToken()
	name := delayedPrefix(due, 7, 12, tok) + "0000000042"
	d, ok := parseDelayedName(name)
	if !ok || d.due != due.UnixMilli() || d.prio != 7 || d.header != 12 || d.token != tok || d.seq != 42 || d.name != name {
		t.Fatalf("parseDelayedName(%q) = %+v %v", name, d, ok)
	}
	if id := d.id(); !kit.ValidName(id) || id != "delayed.p07.i12-"+tok+"-0000000042" {
		t.Fatalf("delayed id %q", id)
	}
	for _, bad := range []string{"", "d1-p07-12-x-0000000001", strings.Replace(name, "p07", "p7", 1), "i12-x-0000000001"} {
		if _, ok := parseDelayedName(bad); ok {
			t.Errorf("parseDelayedName(%q) accepted", bad)
		}
	}
}

func mustEnqueueAt(t *testing.T, q *Queues, name string, prio int, data string, due time.Time) string {
	t.Helper()
	id, err := q.EnqueueDelayed(context.Background(), name, prio, "text/plain", []byte(data), due)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A delayed item is neither taken nor claimed before its due time, is counted
// as delayed until moved, and is taken after it; the take's id carries the
// delayed id's token.
func TestDelayedItemNotTakenBeforeItsTime(t *testing.T) {
	zkc := zktest.Shared(t)
	env := newQueueEnv(t, zkc.Servers(), zktest.Root(t))
	q := env.q
	due := time.Now().Add(3 * time.Second)
	id := mustEnqueueAt(t, q, "later", 0, "late", due)
	if !strings.HasPrefix(id, delayedIDPrefix) {
		t.Fatalf("delayed id %q", id)
	}
	st, err := q.Inspect(context.Background(), "later")
	if err != nil {
		t.Fatal(err)
	}
	if time.Now().Before(due) && (st.Delayed != 1 || st.Length != 1) {
		t.Fatalf("Inspect before the due time = %+v", st)
	}
	it := mustTake(t, q, "later")
	if it != nil && time.Now().Before(due) {
		t.Fatalf("took %+v before its due time", it)
	}
	lease := mustLease(t, env.l)
	c, err := q.Claim(context.Background(), lease, "later", 0)
	if err != nil {
		t.Fatal(err)
	}
	if c != nil && time.Now().Before(due) {
		t.Fatalf("claimed %+v before its due time", c)
	}
	if it == nil && c == nil {
		it, err = q.Take(context.Background(), "later", 30*time.Second)
		if err != nil || it == nil {
			t.Fatalf("take after the due time = %+v, %v", it, err)
		}
	}
	if time.Now().Before(due) {
		t.Fatal("the item came out before its due time")
	}
	if it != nil && !becameItem(it, "late", id) {
		t.Fatalf("took %+v (delayed id %s)", it, id)
	}
	st, err = q.Inspect(context.Background(), "later")
	if err != nil || st.Delayed != 0 {
		t.Fatalf("Inspect after = %+v, %v", st, err)
	}
}

// Delayed items come out in due order whatever their enqueue order, moved by
// the next take of a sidecar that was not there when they came due.
func TestDelayedItemsInDueOrderMovedByAnIdleSidecar(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	now := time.Now()
	last := now.Add(2 * time.Second)
	mustEnqueueAt(t, a.q, "order", 0, "third", last)
	mustEnqueueAt(t, a.q, "order", 0, "first", now.Add(1*time.Second))
	mustEnqueueAt(t, a.q, "order", 0, "second", now.Add(1500*time.Millisecond))
	a.close() // no sidecar is there when they come due
	for time.Now().Before(last.Add(50 * time.Millisecond)) {
		time.Sleep(100 * time.Millisecond)
	}
	b := newQueueEnv(t, zkc.Servers(), root)
	st, err := b.q.Inspect(context.Background(), "order")
	if err != nil || st.Delayed != 3 || st.Length != 3 {
		t.Fatalf("Inspect before any take = %+v, %v", st, err)
	}
	for _, w := range []string{"first", "second", "third", "<empty>"} {
		if d := takeData(t, b.q, "order"); d != w {
			t.Fatalf("took %q, want %q", d, w)
		}
	}
	if n := promtest.ToFloat64(b.q.metrics.delayedMoved); n != 3 {
		t.Fatalf("moved %v, want 3", n)
	}
}

// A due time in the past enqueues at once, under an ordinary id; one more than
// MaxDelay ahead is refused and stores nothing.
func TestDelayedAtInThePastAndTooFar(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	env := newQueueEnv(t, zkc.Servers(), root)
	id := mustEnqueueAt(t, env.q, "past", 0, "now", time.Now().Add(-time.Hour))
	if !strings.HasPrefix(id, "p00.") {
		t.Fatalf("id %q", id)
	}
	if it := mustTake(t, env.q, "past"); it == nil || it.ID != id {
		t.Fatalf("took %+v, want %s", it, id)
	}
	_, err := env.q.EnqueueDelayed(context.Background(), "far", 0, "", []byte("x"), time.Now().Add(MaxDelay+time.Hour))
	if !errors.Is(err, kit.ErrInvalidArgument) {
		t.Fatalf("31 days ahead: %v", err)
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	if ok, _, err := conn.Exists(env.q.qpath("far")); err != nil || ok {
		t.Fatalf("refused enqueue left %s: %v %v", env.q.qpath("far"), ok, err)
	}
}

// A take waiting on a sidecar that never enqueued wakes when a delayed item
// another sidecar enqueued comes due, that sidecar gone by then.
func TestWaitingTakeWakesWhenDelayedItemIsDue(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	b := newQueueEnv(t, zkc.Servers(), root)
	type result struct {
		it  *Item
		err error
		at  time.Time
	}
	got := make(chan result, 1)
	go func() {
		it, err := b.q.Take(context.Background(), "wake", 30*time.Second)
		got <- result{it, err, time.Now()}
	}()
	for {
		b.q.mu.Lock()
		st := b.q.queues["wake"]
		b.q.mu.Unlock()
		if st != nil {
			st.mu.Lock()
			known := st.delayedKnown
			st.mu.Unlock()
			if known {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	due := time.Now().Add(2 * time.Second)
	mustEnqueueAt(t, a.q, "wake", 0, "due", due)
	a.close()
	r := <-got
	if r.err != nil || r.it == nil || string(r.it.Data) != "due" {
		t.Fatalf("waiting take = %+v, %v", r.it, r.err)
	}
	if r.at.Before(due) {
		t.Fatalf("taken at %s, before its due time %s", r.at, due)
	}
}

// Delayed items are moved exactly once while two sidecars take concurrently:
// none is taken twice and none is lost.
func TestDelayedMovedOnceWithTwoSidecarsTaking(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	b := newQueueEnv(t, zkc.Servers(), root)
	const n = 40
	start := time.Now().Add(time.Second)
	for i := range n {
		mustEnqueueAt(t, a.q, "race", i%3, fmt.Sprint("item-", i), start.Add(time.Duration(i%7)*100*time.Millisecond))
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	for _, env := range []*queueEnv{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				total := 0
				for _, c := range seen {
					total += c
				}
				mu.Unlock()
				if total >= n {
					return
				}
				it, err := env.q.Take(context.Background(), "race", 2*time.Second)
				if err != nil {
					errc <- err
					return
				}
				if it == nil {
					continue
				}
				mu.Lock()
				seen[string(it.Data)]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for i := range n {
		if c := seen[fmt.Sprint("item-", i)]; c != 1 {
			t.Errorf("item-%d taken %d times", i, c)
		}
	}
	moved := promtest.ToFloat64(a.q.metrics.delayedMoved) + promtest.ToFloat64(b.q.metrics.delayedMoved)
	if moved != n {
		t.Errorf("moved %v in all, want %d", moved, n)
	}
	st, err := a.q.Inspect(context.Background(), "race")
	if err != nil || st.Length != 0 || st.Delayed != 0 {
		t.Fatalf("Inspect after = %+v, %v", st, err)
	}
}

// A delayed enqueue whose create answer is lost finds its node by token (one
// node, its id); a move whose transaction answer is lost is settled by the
// delayed node being gone (moved once).
func TestDelayedLostAnswers(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSession(t, []string{proxy.Addr()}, root)
	q := New(s, nil)
	t.Cleanup(func() { s.Close(); q.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Make the queue and delayed/ first, so that the lost answer is the item's.
	if _, err := q.EnqueueDelayed(ctx, "lost", 0, "", []byte("warm"), time.Now().Add(200*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if it, err := q.Take(ctx, "lost", 20*time.Second); err != nil || it == nil {
		t.Fatalf("warm-up take = %+v, %v", it, err)
	}

	due := time.Now().Add(2 * time.Second)
	conns := proxy.Accepted()
	proxy.LoseAnswer(1, 15) // create, create2
	id, err := q.EnqueueDelayed(ctx, "lost", 0, "", []byte("once"), due)
	proxy.Restore()
	if err != nil {
		t.Fatal(err)
	}
	if proxy.Accepted() == conns {
		t.Fatal("the create's answer was not lost (no new connection)")
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	names, _, err := conn.Children(q.dpath("lost"))
	if err != nil || len(names) != 1 {
		t.Fatalf("delayed/ = %v, %v", names, err)
	}
	if d, ok := parseDelayedName(names[0]); !ok || d.id() != id {
		t.Fatalf("delayed/ = %v, %v; id %s", names, err, id)
	}

	// The next transaction is the move, by this sidecar's timer, when due.
	conns = proxy.Accepted()
	proxy.LoseAnswer(14) // multi
	for proxy.Accepted() == conns && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	proxy.Restore()
	it, err := q.Take(ctx, "lost", 20*time.Second)
	if err != nil || it == nil || string(it.Data) != "once" {
		t.Fatalf("take = %+v, %v", it, err)
	}
	if it := mustTake(t, q, "lost"); it != nil {
		t.Fatalf("a second copy: %+v", it)
	}
	if names, _, err := conn.Children(q.dpath("lost")); err == nil && len(names) != 0 {
		t.Fatalf("delayed/ after the move = %v", names)
	}
	if n := promtest.ToFloat64(q.metrics.delayedMoved); n != 2 {
		t.Fatalf("moved %v, want 2 (the warm-up item and this one)", n)
	}
}

// becameItem tells whether it is the delayed item of id with data, moved: an
// ordinary item of priority 0 that shares id's token.
func becameItem(it *Item, data, id string) bool {
	tok := id[strings.Index(id, "-")+1 : strings.LastIndex(id, "-")]
	return string(it.Data) == data && strings.Contains(it.ID, "-"+tok+"-") && strings.HasPrefix(it.ID, "p00.")
}
