package rwlocks_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Two sidecars, readers and writers looping on one lock: a writer never overlaps
// anyone, readers are seen inside together, and writers' fencing tokens strictly
// increase.
func TestRWLockAcrossSidecars(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}

	// Two readers on two sidecars hold the lock together.
	r1 := cars[0].Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/doc?mode=read&owner=r1")
	r2 := cars[1].Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/doc?mode=read&owner=r2")
	st := cars[0].Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/doc").Body
	if rs, _ := st["readers"].([]any); len(rs) != 2 || st["writer"] != nil {
		t.Fatalf("state = %v", st)
	}
	held := cars[1].Must(t, http.StatusConflict, http.MethodPost, "/v1/rwlocks/doc?mode=write")
	sidecartest.ProblemIs(t, held, http.StatusConflict, "lock-held")
	if rs, _ := held.Body["readers"].([]any); len(rs) != 2 || held.Body["writer"] != nil {
		t.Fatalf("409 body = %v", held.Body)
	}
	for i, r := range []*sidecartest.Response{r1, r2} {
		cars[i].Must(t, http.StatusNoContent, http.MethodDelete, "/v1/rwlocks/doc?mode=read&lease="+sidecartest.Str(r.Body["lease"]))
	}

	const readers, writers, rounds = 4, 2, 12
	var (
		reading, writing, overlap, mostReaders atomic.Int32
		mu                                     sync.Mutex
		tokens                                 []int64
	)
	x := rwWorker{&reading, &writing, &overlap, &mostReaders, &mu, &tokens}
	errs := make(chan error, readers+writers)
	var wg sync.WaitGroup
	for c := range readers + writers {
		mode := "read"
		if c >= readers {
			mode = "write"
		}
		wg.Go(func() {
			if err := x.run(cars[c%2], c, rounds, mode); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := overlap.Load(); n != 0 {
		t.Fatalf("%d grants overlapped a writer", n)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("writer token %d at grant %d is not above %d", tokens[i], i, tokens[i-1])
		}
	}
	t.Logf("%d writes with increasing tokens; at most %d readers inside at once in the loop", len(tokens), mostReaders.Load())
}

// A reader arriving after a waiting writer waits for it: the writer is granted
// first when the reader before it leaves, the later reader only after the
// writer's release.
func TestRWLockWaitingWriterHoldsBackLaterReaders(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)

	first := a.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/f?mode=read&owner=first")
	writer := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := b.Do(context.Background(), http.MethodPost, "/v1/rwlocks/f?mode=write&wait=30s&owner=writer", nil)
		writer <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the writer never waited", func() bool {
		return sidecartest.Num(a.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/f").Body["waiters"]) == 1
	})
	// A reader that came after the writer is not let in beside the first reader.
	late := a.Must(t, http.StatusConflict, http.MethodPost, "/v1/rwlocks/f?mode=read&owner=late")
	if rs, _ := late.Body["readers"].([]any); len(rs) != 1 || sidecartest.Str(rs[0].(map[string]any)["owner"]) != "first" {
		t.Fatalf("409 body = %v", late.Body)
	}
	reader := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := a.Do(context.Background(), http.MethodPost, "/v1/rwlocks/f?mode=read&wait=30s&owner=late", nil)
		reader <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the late reader never waited", func() bool {
		return sidecartest.Num(a.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/f").Body["waiters"]) == 2
	})
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/rwlocks/f?mode=read&lease="+sidecartest.Str(first.Body["lease"]))
	var w *sidecartest.Response
	select {
	case w = <-writer:
		if w == nil || w.Status != http.StatusCreated {
			t.Fatalf("writer got %v", w)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not granted when the reader before it left")
	}
	st := a.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/f").Body
	if wr, _ := st["writer"].(map[string]any); sidecartest.Str(wr["owner"]) != "writer" || sidecartest.Num(st["waiters"]) != 1 {
		t.Fatalf("state while the writer holds it = %v", st)
	}
	select {
	case r := <-reader:
		t.Fatalf("the late reader got in beside the writer: %v", r)
	default:
	}
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/rwlocks/f?mode=write&lease="+sidecartest.Str(w.Body["lease"]))
	select {
	case r := <-reader:
		if r == nil || r.Status != http.StatusCreated || sidecartest.Num(r.Body["fencingToken"]) <= sidecartest.Num(w.Body["fencingToken"]) {
			t.Fatalf("late reader got %v (writer's token %v)", r, w.Body["fencingToken"])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the late reader was not granted after the writer's release")
	}
}

// Curator's layout: the sidecar's nodes are named as InterProcessReadWriteLock
// names them, and nodes placed as Curator places them are respected: a Curator
// writer holds back the sidecar's readers, Curator readers share with the
// sidecar's readers and hold back its writers.
func TestRWLockSharesCuratorLayout(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	base := root + "/rwlocks/c"
	place := func(infix, owner string) string { return sidecartest.PlaceCuratorNode(t, conn, base, infix, owner) }

	// A Curator writer holds it: the sidecar's reader waits until it goes.
	cw := place("__WRIT__", "curator-writer")
	st := car.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/c").Body
	if wr, _ := st["writer"].(map[string]any); sidecartest.Str(wr["owner"]) != "curator-writer" {
		t.Fatalf("state = %v", st)
	}
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/rwlocks/c?mode=read&wait=30s&owner=sidecar-reader", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the sidecar's reader never queued", func() bool { return len(sidecartest.Children(t, conn, base)) == 2 })
	notYet(t, got, "read granted beside Curator's writer")
	if err := conn.Delete(cw, -1); err != nil {
		t.Fatal(err)
	}
	r := awaitGrant(t, got, "the reader after Curator's writer left")
	readNode := regexp.MustCompile(`^_c_[0-9a-f-]{36}-__READ__[0-9]{10}$`)
	if ch := sidecartest.Children(t, conn, base); len(ch) != 1 || !readNode.MatchString(ch[0]) {
		t.Fatalf("nodes = %v", ch)
	}

	// A Curator reader shares with the sidecar's reader, and holds back its writer.
	cr := place("__READ__", "curator-reader")
	st = car.Must(t, http.StatusOK, http.MethodGet, "/v1/rwlocks/c").Body
	if rs, _ := st["readers"].([]any); len(rs) != 2 {
		t.Fatalf("state = %v", st)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/rwlocks/c?mode=read&lease="+sidecartest.Str(r.Body["lease"]))
	car.Must(t, http.StatusConflict, http.MethodPost, "/v1/rwlocks/c?mode=write")
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/rwlocks/c?mode=write&wait=30s", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the sidecar's writer never queued", func() bool { return len(sidecartest.Children(t, conn, base)) == 2 })
	writeNode := regexp.MustCompile(`^_c_[0-9a-f-]{36}-__WRIT__[0-9]{10}$`)
	for _, n := range sidecartest.Children(t, conn, base) {
		if n != cr[len(base)+1:] && !writeNode.MatchString(n) {
			t.Fatalf("writer node %s", n)
		}
	}
	if err := conn.Delete(cr, -1); err != nil {
		t.Fatal(err)
	}
	awaitGrant(t, got, "the writer after Curator's reader left")
}

// GET /v1/locks/{name}/events: the current state first, then every change of
// holder or of the number of waiters; many streams cost one watch.
func TestLockEvents(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, b := sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)

	st1 := a.OpenStream(t, "/v1/locks/ev/events")
	first := st1.Next(t, 5*time.Second)
	if first.Name != "lock" || first.Data["holder"] != nil || sidecartest.Num(first.Data["waiters"]) != 0 {
		t.Fatalf("first event = %+v", first)
	}
	st2 := a.OpenStream(t, "/v1/locks/ev/events")
	st2.Next(t, 5*time.Second)

	g := b.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/ev?owner=holder")
	ev := st1.Next(t, 5*time.Second)
	if h, _ := ev.Data["holder"].(map[string]any); sidecartest.Str(h["owner"]) != "holder" || sidecartest.Num(h["fencingToken"]) != sidecartest.Num(g.Body["fencingToken"]) {
		t.Fatalf("event = %+v", ev)
	}
	waiter := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := b.Do(context.Background(), http.MethodPost, "/v1/locks/ev?wait=30s&owner=next", nil)
		waiter <- r
	}()
	if ev := st1.Next(t, 5*time.Second); sidecartest.Num(ev.Data["waiters"]) != 1 {
		t.Fatalf("event = %+v", ev)
	}
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/ev?lease="+sidecartest.Str(g.Body["lease"]))
	<-waiter
	for {
		ev := st1.Next(t, 5*time.Second)
		if h, _ := ev.Data["holder"].(map[string]any); sidecartest.Str(h["owner"]) == "next" && sidecartest.Num(ev.Data["waiters"]) == 0 {
			break
		}
	}
	if got := sidecartest.Metrics(t, a, "coord_lock_watched")[0]; got != 1 {
		t.Fatalf("coord_lock_watched = %v with two streams on one lock, want 1", got)
	}
}

// awaitGrant waits for a background request's answer and wants it 201.
func awaitGrant(t *testing.T, ch <-chan *sidecartest.Response, what string) *sidecartest.Response {
	t.Helper()
	select {
	case r := <-ch:
		if r == nil || r.Status != http.StatusCreated {
			t.Fatalf("%s: got %v", what, r)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not granted", what)
	}
	return nil
}

// notYet fails when a background request has answered already.
func notYet(t *testing.T, ch <-chan *sidecartest.Response, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: %v", what, r)
	default:
	}
}

// rwWorker loops rounds of acquire, check, release in mode on lock doc.
type rwWorker struct {
	reading, writing, overlap, mostReaders *atomic.Int32
	mu                                     *sync.Mutex
	tokens                                 *[]int64
}

func (x rwWorker) run(car *sidecartest.Sidecar, c, rounds int, mode string) error {
	for range rounds {
		r, err := car.Do(context.Background(), http.MethodPost, fmt.Sprintf("/v1/rwlocks/doc?mode=%s&wait=60s&owner=c%d", mode, c), nil)
		if err != nil || r.Status != http.StatusCreated {
			return fmt.Errorf("acquire %s: %v %v", mode, err, r)
		}
		if mode == "write" {
			x.write(sidecartest.Num(r.Body["fencingToken"]))
		} else {
			x.read()
		}
		d, err := car.Do(context.Background(), http.MethodDelete, "/v1/rwlocks/doc?mode="+mode+"&lease="+sidecartest.Str(r.Body["lease"]), nil)
		if err != nil || d.Status != http.StatusNoContent {
			return fmt.Errorf("release: %v %v", err, d)
		}
	}
	return nil
}

func (x rwWorker) write(token int64) {
	if x.writing.Add(1) != 1 || x.reading.Load() != 0 {
		x.overlap.Add(1)
	}
	x.mu.Lock()
	*x.tokens = append(*x.tokens, token)
	x.mu.Unlock()
	time.Sleep(time.Millisecond)
	x.writing.Add(-1)
}

func (x rwWorker) read() {
	n := x.reading.Add(1)
	if x.writing.Load() != 0 {
		x.overlap.Add(1)
	}
	for m := x.mostReaders.Load(); n > m && !x.mostReaders.CompareAndSwap(m, n); m = x.mostReaders.Load() {
	}
	time.Sleep(2 * time.Millisecond)
	x.reading.Add(-1)
}
