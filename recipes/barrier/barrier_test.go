package barrier

import (
	"context"
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

type barrierEnv struct {
	s *zookeeper.Session
	b *Barriers
	l *kit.Leases
}

func newBarrierEnv(t *testing.T, servers []string, root string) *barrierEnv {
	t.Helper()
	s := zookeepertest.NewSession(t, servers, root)
	return &barrierEnv{s: s, b: New(s, prometheus.NewRegistry()), l: kit.NewLeases(s, nil)}
}

// waitResult runs f in a goroutine and returns its error on a channel.
func waitResult(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

func within(t *testing.T, ch <-chan error, d time.Duration, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(d):
		t.Fatalf("%s: no answer within %s", what, d)
		return nil
	}
}

func notYet(t *testing.T, ch <-chan error, d time.Duration, what string) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s returned early: %v", what, err)
	case <-time.After(d):
	}
}

// A raised barrier holds waiters until it is lowered, on any session.
func TestBarrierRaiseWaitLower(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newBarrierEnv(t, zkc.Servers(), root)
	b := newBarrierEnv(t, zkc.Servers(), root)
	ctx := context.Background()
	if err := b.b.Wait(ctx, "gate", 0); err != nil {
		t.Fatalf("wait on a barrier never raised: %v", err)
	}
	if err := a.b.Raise(ctx, "gate"); err != nil {
		t.Fatal(err)
	}
	if err := a.b.Raise(ctx, "gate"); err != nil {
		t.Fatalf("raise again: %v", err)
	}
	if up, err := b.b.Raised(ctx, "gate"); err != nil || !up {
		t.Fatalf("Raised = %v, %v", up, err)
	}
	if err := b.b.Wait(ctx, "gate", 0); !errors.Is(err, ErrBarrierRaised) {
		t.Fatalf("wait 0 on a raised barrier: %v", err)
	}
	start := time.Now()
	if err := b.b.Wait(ctx, "gate", 200*time.Millisecond); !errors.Is(err, ErrBarrierRaised) || time.Since(start) < 200*time.Millisecond {
		t.Fatalf("bounded wait: %v after %s", err, time.Since(start))
	}
	passed := waitResult(func() error { return b.b.Wait(ctx, "gate", 30*time.Second) })
	notYet(t, passed, 200*time.Millisecond, "wait on a raised barrier")
	if err := a.b.Lower(ctx, "gate"); err != nil {
		t.Fatal(err)
	}
	if err := within(t, passed, 5*time.Second, "wait after lower"); err != nil {
		t.Fatal(err)
	}
	if err := a.b.Lower(ctx, "gate"); err != nil {
		t.Fatalf("lower a lowered barrier: %v", err)
	}
	// A waiter that goes away returns at once with its context's error.
	if err := a.b.Raise(ctx, "gate"); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	gone := waitResult(func() error { return b.b.Wait(cctx, "gate", 30*time.Second) })
	cancel()
	if err := within(t, gone, 5*time.Second, "cancelled wait"); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
}

// A barrier raised for a lease falls when the lease ends; raised persistently
// afterwards, it stays.
func TestBarrierForLeaseFallsWithLease(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newBarrierEnv(t, zkc.Servers(), root)
	b := newBarrierEnv(t, zkc.Servers(), root)
	ctx := context.Background()
	lease, err := a.l.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.b.RaiseFor(ctx, lease, "deploy"); err != nil {
		t.Fatal(err)
	}
	if err := a.b.RaiseFor(ctx, lease, "deploy"); err != nil {
		t.Fatalf("raise again for the same lease: %v", err)
	}
	if h := lease.Holds(); len(h) != 1 || h[0] != (kit.Hold{Kind: "barrier", Name: "deploy"}) {
		t.Fatalf("holds %v", h)
	}
	passed := waitResult(func() error { return b.b.Wait(ctx, "deploy", 30*time.Second) })
	notYet(t, passed, 200*time.Millisecond, "wait on a leased barrier")
	if err := a.l.Revoke(lease.ID); err != nil {
		t.Fatal(err)
	}
	if err := within(t, passed, 5*time.Second, "wait after the lease ended"); err != nil {
		t.Fatal(err)
	}

	// Raised for a lease, then persistently: the lease's end leaves it raised.
	lease2, _ := a.l.Grant(time.Minute, false)
	if err := a.b.RaiseFor(ctx, lease2, "deploy"); err != nil {
		t.Fatal(err)
	}
	if err := b.b.Raise(ctx, "deploy"); err != nil {
		t.Fatal(err)
	}
	if err := a.l.Revoke(lease2.ID); err != nil {
		t.Fatal(err)
	}
	if up, err := b.b.Raised(ctx, "deploy"); err != nil || !up {
		t.Fatalf("persistent raise after the lease's: raised=%v %v", up, err)
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	if _, st, err := conn.Exists(path.Join(root, "barriers", "deploy")); err != nil || st.EphemeralOwner != 0 {
		t.Fatalf("barrier node %+v %v, want persistent", st, err)
	}
}

// A "ready" node left over from an earlier round does not let a new participant
// through: it is deleted and the count starts afresh. A late joiner of a round
// under way passes at once; the barrier can be used round after round.
func TestDoubleBarrierRounds(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	env := newBarrierEnv(t, zkc.Servers(), root)
	ctx := context.Background()
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	parent := path.Join(root, "double-barriers", "round")
	createNodes(t, conn, root, path.Dir(parent), parent, parent+"/ready")
	la, lb, lc := mustLease(t, env.l), mustLease(t, env.l), mustLease(t, env.l)
	_, err := env.b.Enter(ctx, la, "round", "a", 2, 0)
	var nr *BarrierNotReadyError
	if !errors.As(err, &nr) || nr.Participants != 1 || nr.Count != 2 || nr.Lease != la.ID {
		t.Fatalf("enter past a stale ready: %v", err)
	}
	if ok, _, _ := conn.Exists(parent + "/ready"); ok {
		t.Fatal("the stale ready node is still there")
	}
	waitA := waitResult(func() error { _, err := env.b.Enter(ctx, la, "round", "a", 2, 30*time.Second); return err })
	if _, err := env.b.Enter(ctx, lb, "round", "b", 2, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := within(t, waitA, 5*time.Second, "a once b entered"); err != nil {
		t.Fatal(err)
	}
	if _, err := env.b.Enter(ctx, lc, "round", "c", 2, 0); err != nil {
		t.Fatalf("late joiner: %v", err)
	}
	st, err := env.b.InspectDouble(ctx, "round")
	if err != nil || !st.Ready || st.Count != 2 || len(st.Participants) != 3 {
		t.Fatalf("InspectDouble = %+v, %v", st, err)
	}
	for _, p := range []struct {
		l  *kit.Lease
		id string
	}{{la, "a"}, {lb, "b"}} {
		var ne *BarrierNotEmptyError
		if err := env.b.Leave(ctx, p.l, "round", p.id, 0); !errors.As(err, &ne) {
			t.Fatalf("leave %s before c: %v", p.id, err)
		}
	}
	if err := env.b.Leave(ctx, lc, "round", "c", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if kids, _, err := conn.Children(parent); err == nil && len(kids) > 0 {
		t.Fatalf("left behind after the last leave: %v", kids)
	}
	doubleBarrierRoundTwo(t, env)
}

// createNodes creates persistent nodes at paths, parents first.
func createNodes(t *testing.T, conn *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
}

// doubleBarrierRoundTwo runs a second round of the double barrier "round" with
// fresh leases: the first participant waits for a second, which passes.
func doubleBarrierRoundTwo(t *testing.T, env *barrierEnv) {
	t.Helper()
	ctx := context.Background()
	l2a, l2b := mustLease(t, env.l), mustLease(t, env.l)
	if _, err := env.b.Enter(ctx, l2a, "round", "a", 2, 0); !errors.Is(err, ErrBarrierNotReady) {
		t.Fatalf("round two, first participant: %v", err)
	}
	if _, err := env.b.Enter(ctx, l2b, "round", "b", 2, 0); err != nil {
		t.Fatalf("round two, second participant: %v", err)
	}
}

func mustLease(t *testing.T, l *kit.Leases) *kit.Lease {
	t.Helper()
	lease, err := l.Grant(time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	return lease
}
