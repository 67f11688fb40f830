package statedir

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// counted is a snapshot whose state carries a version (as its Session.ID) and
// a Saver hook that records every write.
type counted struct {
	version atomic.Int64
	mu      sync.Mutex
	written []int64
}

func (c *counted) snapshot() State {
	return State{ZK: "z:2181", Root: "/coord", Session: Session{ID: c.version.Load()}}
}

func (c *counted) onWrite(s State, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		c.written = append(c.written, s.Session.ID)
	}
}

func (c *counted) writes() []int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int64(nil), c.written...)
}

func (c *counted) change(s *Saver) {
	c.version.Add(1)
	s.MarkDirty()
}

func TestTheSaverCoalescesMarksAndFlushWritesTheLatest(t *testing.T) {
	d := openTemp(t)
	var c counted
	// An interval no test reaches: after the first write, marks only coalesce.
	s, err := d.Saver(c.snapshot, time.Hour, OnWrite(c.onWrite))
	if err != nil {
		t.Fatal(err)
	}
	const marks = 10000
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range marks / 4 {
				c.change(s)
			}
		})
	}
	wg.Wait()
	testutil.Eventually(t, 5*time.Second, "the first mark written at once", func() bool { return len(c.writes()) == 1 })

	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	w := c.writes()
	if len(w) != 2 || w[1] != marks {
		t.Fatalf("writes %v for %d marks, want two, the last of version %d", w, marks, marks)
	}
	got, err := d.Load("z:2181", "/coord")
	if err != nil || got.Session.ID != marks {
		t.Fatalf("loaded version %d, %v; want %d", got.Session.ID, err, marks)
	}
}

func TestAMarkAfterAWriteIsWrittenTooWithinTheInterval(t *testing.T) {
	d := openTemp(t)
	var c counted
	s, err := d.Saver(c.snapshot, 10*time.Millisecond, OnWrite(c.onWrite))
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 3; v++ {
		c.change(s)
		testutil.Eventually(t, 5*time.Second, "the change written", func() bool {
			w := c.writes()
			return len(w) > 0 && w[len(w)-1] == v
		})
	}
	if w := c.writes(); len(w) != 3 {
		t.Errorf("writes %v for three marks written one by one, want three", w)
	}
}

func TestSaverCloseWaitsForAWriteInProgress(t *testing.T) {
	d := openTemp(t)
	entered, release := make(chan struct{}), make(chan struct{})
	s, err := d.Saver(func() State {
		close(entered)
		<-release
		return State{}
	}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.MarkDirty()
	<-entered
	closed := make(chan struct{})
	go func() {
		_ = d.Close() // closes the Saver first
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while the Saver's goroutine was writing")
	case <-time.After(50 * time.Millisecond): // the claim: nothing within it
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(testutil.Patience(5 * time.Second)):
		t.Fatal("Close did not return once the write ended")
	}
	select {
	case <-s.done:
	default:
		t.Fatal("Close returned before the Saver's goroutine ended")
	}
	if err := s.Flush(context.Background()); !errors.Is(err, ErrSaverClosed) {
		t.Errorf("Flush after Close: %v, want ErrSaverClosed", err)
	}
	if _, err := d.Saver(func() State { return State{} }, time.Second); err == nil {
		t.Error("a Saver started on a closed Dir")
	}
}

func TestAFailedWriteIsRetried(t *testing.T) {
	d := openTemp(t)
	var c counted
	var failures atomic.Int64
	var broken atomic.Bool
	broken.Store(true)
	bad := State{Leases: []Lease{{Holds: []Hold{{Data: []byte("{not json")}}}}} // Save cannot encode it
	snapshot := func() State {
		if broken.Load() {
			return bad
		}
		return c.snapshot()
	}
	s, err := d.Saver(snapshot, 5*time.Millisecond, OnWrite(func(st State, err error) {
		if err != nil {
			failures.Add(1)
		}
		c.onWrite(st, err)
	}))
	if err != nil {
		t.Fatal(err)
	}
	c.change(s)
	testutil.Eventually(t, 5*time.Second, "a failed write", func() bool { return failures.Load() > 0 })
	if s.Err() == nil {
		t.Error("Err after a failed write: nil")
	}
	broken.Store(false)
	testutil.Eventually(t, 5*time.Second, "the write retried", func() bool { return len(c.writes()) > 0 })
	if s.Err() != nil {
		t.Errorf("Err after a write that succeeded: %v", s.Err())
	}
}

// BenchmarkMarkDirty is the request path's cost of a change: what a grant or a
// keepalive pays for the state to follow it.
func BenchmarkMarkDirty(b *testing.B) {
	d, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	s, err := d.Saver(func() State { return State{} }, 10*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.MarkDirty()
		}
	})
}

// onSync counts a Saver's syncs (tests only).
func onSync(f func()) SaverOption { return func(s *Saver) { s.onSync = f } }

// With DurableEvery, writes between two syncs are not synced, and the last
// write is synced within the period after it, with no change to prompt it;
// Flush syncs at once.
func TestWritesBetweenSyncsAreSyncedWithinDurableEvery(t *testing.T) {
	d := openTemp(t)
	var c counted
	var syncs atomic.Int64
	s, err := d.Saver(c.snapshot, time.Millisecond, OnWrite(c.onWrite), DurableEvery(time.Hour), onSync(func() { syncs.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(1); v <= 5; v++ {
		c.change(s)
		testutil.Eventually(t, 5*time.Second, "the change written", func() bool {
			w := c.writes()
			return len(w) > 0 && w[len(w)-1] == v
		})
	}
	if n := syncs.Load(); n != 1 {
		t.Fatalf("%d syncs for %d writes within the period, want 1 (the first)", n, len(c.writes()))
	}
	if got, err := d.Load("z:2181", "/coord"); err != nil || got.Session.ID != 5 {
		t.Fatalf("loaded version %d, %v; want the last write, 5, though unsynced", got.Session.ID, err)
	}
	if err := s.Flush(context.Background()); err != nil || syncs.Load() != 2 {
		t.Fatalf("Flush: %v, %d syncs; want a second sync", err, syncs.Load())
	}

	// A short period: the last write is synced within it without another change.
	d2 := openTemp(t)
	var c2 counted
	var syncs2 atomic.Int64
	s2, err := d2.Saver(c2.snapshot, time.Millisecond, DurableEvery(50*time.Millisecond), onSync(func() { syncs2.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	c2.change(s2) // written and synced: the first write
	testutil.Eventually(t, 5*time.Second, "the first write synced", func() bool { return syncs2.Load() == 1 })
	c2.change(s2) // written at once, synced up to 50 ms later
	testutil.Eventually(t, 5*time.Second, "the second write synced without another change", func() bool { return syncs2.Load() == 2 })
}
