package zookeeper_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

// events counts a Session's state changes by event name.
type events struct {
	mu sync.Mutex
	n  map[string]int
}

func countEvents(s *zookeeper.Session) *events {
	e := &events{n: map[string]int{}}
	s.Subscribe(func(ch zookeeper.StateChange) {
		e.mu.Lock()
		e.n[ch.Event]++
		e.mu.Unlock()
	})
	return e
}

func (e *events) get(name string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n[name]
}

// Two Sessions presenting one session (the second resumes it while the first
// still holds it, as a copied state file does): the first, at its reconnect,
// finds the second's record, is told once, is never connected again and
// detaches itself; the second keeps the session, its record and its ephemeral node,
// having lost the session once at most (to the first's one reconnect).
func TestIncarnationTakenOverOnce(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	dir := root + "/sessions"
	taken := make(chan []byte, 2)
	a := zookeepertest.Start(t, zookeeper.Config{Servers: zkc.Servers(), Root: root, Timeout: 4 * time.Second,
		Incarnation: &zookeeper.Incarnation{Dir: dir, Record: []byte(`{"who":"a"}`), TakenOver: func(_ int64, found []byte) { taken <- found }}})
	if err := a.WaitClaimed(ctx); err != nil {
		t.Fatal(err)
	}
	node, r := holdEphemeral(t, ctx, a)
	watcher := zktest.Connect(t, zkc.Servers(), 4*time.Second)
	record := zookeeper.IncarnationPath(dir, r.ID)
	if got, st, err := watcher.Get(record); err != nil || string(got) != `{"who":"a"}` || st.EphemeralOwner != r.ID {
		t.Fatalf("%s: %q, %v; want a's record, owned by 0x%x", record, got, err, r.ID)
	}
	aEvents := countEvents(a)

	b := zookeepertest.Start(t, zookeeper.Config{Servers: zkc.Servers(), Root: root, Timeout: 4 * time.Second, Resume: &r,
		Incarnation: &zookeeper.Incarnation{Dir: dir, Record: []byte(`{"who":"b"}`), TakenOver: func(int64, []byte) { t.Error("b was told it was taken over") }}})
	bEvents := countEvents(b)
	if err := b.WaitResume(ctx); err != nil {
		t.Fatalf("WaitResume: %v", err)
	}
	if err := b.WaitClaimed(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case found := <-taken:
		if string(found) != `{"who":"b"}` {
			t.Fatalf("a was told of the record %q, want b's", found)
		}
	case <-ctx.Done():
		t.Fatal("a was never told its session was taken over")
	}
	testutil.Eventually(t, 10*time.Second, "a detached by itself", func() bool { return a.State() == zookeeper.StateClosed })
	if ep, err := b.WaitCurrent(ctx); err != nil || ep.ID() != r.ID {
		t.Fatalf("b after a detached: %v; want session 0x%x connected", err, r.ID)
	}
	if n := aEvents.get("reconnected"); n != 0 {
		t.Errorf("a reconnected %d times after b's claim, want never", n)
	}
	if n := bEvents.get("suspended"); n > 1 {
		t.Errorf("b lost the session %d times, want once at most", n)
	}
	if got, _, err := watcher.Get(record); err != nil || string(got) != `{"who":"b"}` {
		t.Fatalf("%s after the takeover: %q, %v; want b's record", record, got, err)
	}
	if owner := ownerOf(t, watcher, node); owner != r.ID {
		t.Fatalf("%s owned by 0x%x after the takeover, want 0x%x", node, owner, r.ID)
	}
	select {
	case found := <-taken:
		t.Fatalf("a was told twice (again with %q)", found)
	default:
	}
}

// claimedSession starts a Session with the record rec under root/sessions,
// once its record is written, and the record's path; taken gets what
// TakenOver is told.
func claimedSession(t *testing.T, ctx context.Context, servers []string, root, rec string, taken chan<- []byte) (*zookeeper.Session, string) {
	t.Helper()
	dir := root + "/sessions"
	s := zookeepertest.Start(t, zookeeper.Config{Servers: servers, Root: root, Timeout: 4 * time.Second,
		Incarnation: &zookeeper.Incarnation{Dir: dir, Record: []byte(rec), TakenOver: func(_ int64, found []byte) { taken <- found }}})
	if err := s.WaitClaimed(ctx); err != nil {
		t.Fatal(err)
	}
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	return s, zookeeper.IncarnationPath(dir, ep.ID())
}

// A record changed while the connection stays up (as when a copy takes the
// session through another server of an ensemble, where the old connection
// is not dropped at once) is seen through the record's watch, without a
// reconnect (nothing here drops the connection: without the watch, nothing
// would be told): the Session is told and detaches itself.
func TestIncarnationChangedWhileConnected(t *testing.T) {
	zkc := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	taken := make(chan []byte, 2)
	a, record := claimedSession(t, ctx, zkc.Servers(), zktest.Root(t), `{"who":"a"}`, taken)
	watcher := zktest.Connect(t, zkc.Servers(), 4*time.Second)
	if _, err := watcher.Set(record, []byte(`{"who":"c"}`), -1); err != nil {
		t.Fatal(err)
	}
	select {
	case found := <-taken:
		if string(found) != `{"who":"c"}` {
			t.Fatalf("told of %q, want the record written over a's", found)
		}
	case <-ctx.Done():
		t.Fatal("a changed record was never told")
	}
	testutil.Eventually(t, 10*time.Second, "the session detached", func() bool { return a.State() == zookeeper.StateClosed })
	if ok, _, err := watcher.Exists(record); err != nil || !ok {
		t.Fatalf("the record after the take-over: exists %v, %v; want the session alive (detached, not closed)", ok, err)
	}
}

// A record deleted by another hand is written again, and nothing is told.
func TestIncarnationDeletedIsWrittenAgain(t *testing.T) {
	zkc := zktest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
	defer cancel()
	taken := make(chan []byte, 2)
	a, record := claimedSession(t, ctx, zkc.Servers(), zktest.Root(t), `{"who":"a"}`, taken)
	watcher := zktest.Connect(t, zkc.Servers(), 4*time.Second)
	if err := watcher.Delete(record, -1); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the record written again", func() bool {
		got, _, err := watcher.Get(record)
		return err == nil && string(got) == `{"who":"a"}`
	})
	if err := a.WaitClaimed(ctx); err != nil || a.State() != zookeeper.StateConnected {
		t.Fatalf("after the record was written again: %v, %v; want connected and claimed", err, a.State())
	}
	select {
	case found := <-taken:
		t.Fatalf("told of a take-over (%q) for a deleted record", found)
	default:
	}
}
