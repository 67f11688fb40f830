package counter

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

// Concurrent adds on two sessions end exactly at their sum; on one session they
// are combined (fewer compare-and-sets than adds), and each add answers a
// distinct value: the counter's value right after it.
func TestConcurrentAddsCombine(t *testing.T) {
	a, b, _ := twoSidecars(t)
	ctx := context.Background()

	const per = 40
	var mu sync.Mutex
	var seen []int64
	var wg sync.WaitGroup
	errs := make(chan error, 2*8*per)
	for i := range 16 {
		c := a
		if i%2 == 1 {
			c = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per / 2 {
				v, err := c.Add(ctx, "hits", 1)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				seen = append(seen, v)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := a.Get(ctx, "hits")
	if err != nil || st.Value != 16*per/2 {
		t.Fatalf("value %+v %v, want %d", st, err, 16*per/2)
	}
	sort.Slice(seen, func(i, j int) bool { return seen[i] < seen[j] })
	for i, v := range seen {
		if v != int64(i+1) {
			t.Fatalf("answers are not 1..%d: %v", len(seen), seen)
		}
	}
	var m dto.Metric
	if err := a.metrics.batch.Write(&m); err != nil {
		t.Fatal(err)
	}
	h := m.GetHistogram()
	t.Logf("sidecar a: %d adds in %d compare-and-sets", uint64(h.GetSampleSum()), h.GetSampleCount())
	if uint64(h.GetSampleSum()) != 8*per/2 {
		t.Fatalf("batches carried %v adds, want %d", h.GetSampleSum(), 8*per/2)
	}
}

// A counter written in DistributedAtomicLong's layout (8 bytes big-endian) by a
// plain client reads and adds right, and what the sidecar writes is that layout.
func TestDistributedAtomicLongLayout(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	c := New(zookeepertest.NewSession(t, zkc.Servers(), root), nil)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()

	if st, err := c.Get(ctx, "never"); err != nil || st.Value != 0 || st.Exists {
		t.Fatalf("never set: %+v %v", st, err)
	}
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{root, root + "/counters"} {
		if _, err := conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := conn.Create(root+"/counters/curator", binary.BigEndian.AppendUint64(nil, uint64(1<<40)), 0, acl); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Add(ctx, "curator", -3); err != nil || v != 1<<40-3 {
		t.Fatalf("add: %d %v", v, err)
	}
	data, _, err := conn.Get(root + "/counters/curator")
	if err != nil || len(data) != 8 || int64(binary.BigEndian.Uint64(data)) != 1<<40-3 {
		t.Fatalf("layout: %x %v", data, err)
	}
	// Compare-and-set.
	var mm *MismatchError
	if _, err := c.Set(ctx, "curator", 7, ptr(int64(0))); !errors.As(err, &mm) || mm.Value != 1<<40-3 {
		t.Fatalf("mismatch: %v", err)
	}
	if v, err := c.Set(ctx, "curator", 7, ptr(int64(1<<40-3))); err != nil || v != 7 {
		t.Fatalf("set: %d %v", v, err)
	}
	if v, err := c.Set(ctx, "fresh", 5, ptr(int64(0))); err != nil || v != 5 {
		t.Fatalf("set of a never-set counter expecting 0: %d %v", v, err)
	}
}

// The int64 range, and a node that is not a counter.
func TestOverflowAndCorrupt(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	c := New(zookeepertest.NewSession(t, zkc.Servers(), root), nil)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	// Overflow: refused, the counter unchanged.
	if _, err := c.Set(ctx, "big", math.MaxInt64-1, nil); err != nil {
		t.Fatal(err)
	}
	var of *OverflowError
	if _, err := c.Add(ctx, "big", 2); !errors.As(err, &of) || of.Value != math.MaxInt64-1 {
		t.Fatalf("overflow: %v", err)
	}
	if v, err := c.Add(ctx, "big", 1); err != nil || v != math.MaxInt64 {
		t.Fatalf("up to the max: %d %v", v, err)
	}
	// Not a counter: left alone.
	if _, err := conn.Create(root+"/counters/text", []byte("12"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, "text", 1); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt: %v", err)
	}
}

func ptr[T any](v T) *T { return &v }

// After its own write the sidecar writes again on what it knows, without
// reading; any change by another client in between is seen: a write (by the
// version), and a delete followed by a new node written back to the very
// version the sidecar knows (by the child watch), where a compare-and-set on
// the known version alone would overwrite the new node's value.
func TestKnownValueWritesWithoutReadingAndSeesOtherWriters(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	reg := prometheus.NewRegistry()
	c := New(zookeepertest.NewSession(t, zkc.Servers(), root), reg)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	p := root + "/counters/known"
	var want int64
	// add adds 1 and tells whether it was written on the known value.
	add := func() bool {
		t.Helper()
		before := counterValue(t, reg, "coord_counter_writes_unread_total")
		want++
		if v, err := c.Add(ctx, "known", 1); err != nil || v != want {
			t.Fatalf("add: %d %v, want %d", v, err, want)
		}
		return counterValue(t, reg, "coord_counter_writes_unread_total") == before+1
	}
	// settle adds until an add is written on the known value (the child watch
	// is armed in the background: a few adds read first).
	settle := func() {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, "an add written on the known value", add)
	}
	stored := func() (int64, *zk.Stat) {
		t.Helper()
		data, st, err := conn.Get(p)
		if err != nil || len(data) != 8 {
			t.Fatalf("get: %x %v", data, err)
		}
		return int64(binary.BigEndian.Uint64(data)), st
	}
	settle()
	for range 5 {
		if !add() {
			t.Fatal("an add after the sidecar's own write read first")
		}
	}

	// Another client writes: the next add is refused on the version, reads, and
	// adds to the other client's value.
	_, st := stored()
	if _, err := conn.Set(p, binary.BigEndian.AppendUint64(nil, 100), st.Version); err != nil {
		t.Fatal(err)
	}
	want = 100
	if add() {
		t.Fatal("an add was written on a value another client had changed")
	}
	settle()

	// Another client deletes the counter and makes it again, writing it back to
	// the version the sidecar knows, with a value of its own.
	_, st = stored()
	remake(t, conn, p, 500, st.Version)
	if _, st2 := stored(); st2.Version != st.Version {
		t.Fatalf("made again at version %d, want %d", st2.Version, st.Version)
	}
	want = 500
	if add() {
		t.Fatal("an add was written on the known value of a counter deleted and made again")
	}
	if v, _ := stored(); v != 501 {
		t.Fatalf("stored %d after the add, want 501", v)
	}
	settle()
	if v, _ := stored(); v != want {
		t.Fatalf("stored %d, want %d", v, want)
	}
}

// twoSidecars returns the counters of two sessions on a fresh root, and the
// registry of the first one's metrics.
func twoSidecars(t *testing.T) (*Counters, *Counters, *prometheus.Registry) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	reg := prometheus.NewRegistry()
	return New(zookeepertest.NewSession(t, zkc.Servers(), root), reg),
		New(zookeepertest.NewSession(t, zkc.Servers(), root), nil), reg
}

// remake deletes the counter at p and makes it again holding value, written
// back to version (as another client might, behind a sidecar's back).
func remake(t *testing.T, conn *zk.Conn, p string, value int64, version int32) {
	t.Helper()
	data := binary.BigEndian.AppendUint64(nil, uint64(value))
	if err := conn.Delete(p, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(p, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for i := range version {
		if _, err := conn.Set(p, data, i); err != nil {
			t.Fatal(err)
		}
	}
}

// counterValue reads a counter metric of reg.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, ok := testutil.MetricValue(t, reg, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return v
}

// What a sidecar knows is only ever the base of a compare-and-set, never an
// answer: after another sidecar changed the counter, an expect= that matches
// the counter (not what is known) succeeds, and an add that would overflow
// what is known, but not the counter, is made.
func TestKnownValueIsNeverAnAnswer(t *testing.T) {
	a, b, reg := twoSidecars(t)
	ctx := context.Background()
	unread := func() float64 { return counterValue(t, reg, "coord_counter_writes_unread_total") }
	// a writes until it knows the counter's value.
	knows := func(name string, delta int64) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, "a write on the known value", func() bool {
			before := unread()
			if _, err := a.Add(ctx, name, delta); err != nil {
				t.Fatal(err)
			}
			return unread() == before+1
		})
		if _, err := a.Add(ctx, name, 0); err != nil { // known again after that write
			t.Fatal(err)
		}
	}
	knows("x", 1)
	cur, err := b.Add(ctx, "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := a.Set(ctx, "x", 10, ptr(cur)); err != nil || v != 10 {
		t.Fatalf("expect=%d after b's add: %d %v", cur, v, err)
	}

	if _, err := a.Set(ctx, "big", math.MaxInt64-1, nil); err != nil {
		t.Fatal(err)
	}
	knows("big", 0)
	if _, err := b.Set(ctx, "big", 0, nil); err != nil {
		t.Fatal(err)
	}
	if v, err := a.Add(ctx, "big", 5); err != nil || v != 5 {
		t.Fatalf("add after b reset the counter: %d %v, want 5", v, err)
	}
}

// A reconnect of the same session drops what is known: a counter deleted and
// made again (at the version the sidecar knew) while it was disconnected is read
// before it is written.
func TestKnownValueDroppedOnReconnect(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := zookeepertest.Start(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Root: root, Timeout: 10 * time.Second})
	reg := prometheus.NewRegistry()
	c := New(s, reg)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	p := root + "/counters/r"
	var last int64
	testutil.Eventually(t, 5*time.Second, "a write on the known value", func() bool {
		before := counterValue(t, reg, "coord_counter_writes_unread_total")
		v, err := c.Add(ctx, "r", 1)
		if err != nil {
			t.Fatal(err)
		}
		last = v
		return counterValue(t, reg, "coord_counter_writes_unread_total") == before+1
	})
	_, st, err := conn.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for s.State() == zookeeper.StateConnected {
		<-s.Changed()
	}
	remake(t, conn, p, 700, st.Version)
	proxy.Restore()
	for s.State() != zookeeper.StateConnected {
		<-s.Changed()
	}
	if v, err := c.Add(ctx, "r", 1); err != nil || v != 701 {
		t.Fatalf("add after the reconnect: %d %v, want 701 (known before the cut: %d)", v, err, last)
	}
}
