package lock

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/kittest"
	"github.com/coord-sidecar/coord-sidecar/recipes/line"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// newLockTest returns the shared server, a fresh root, the locks of a new
// session there, and a function that grants a lease of that session.
func newLockTest(t *testing.T) (*zktest.Cluster, string, *Locks, func() *kit.Lease) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), root)
	return zkc, root, New(s, prometheus.NewRegistry()), kittest.GrantFor(t, kit.NewLeases(s, nil))
}

// A waiter on this sidecar is handed the lock when its predecessor, the holder,
// is released here, and its token is higher; the waiter behind it waits until
// that new holder is released in turn.
func TestLocalHandoffGrantsTheSuccessor(t *testing.T) {
	_, _, locks, grant := newLockTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b, c := grant(), grant(), grant()
	ga, err := locks.Acquire(ctx, a, "hot", "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		g   *LockGrant
		err error
	}
	bDone := make(chan outcome, 1)
	go func() {
		g, err := locks.Acquire(ctx, b, "hot", "b", 20*time.Second)
		bDone <- outcome{g, err}
	}()
	waitWaiters(t, locks, "hot", 1)
	cDone := make(chan outcome, 1)
	go func() {
		g, err := locks.Acquire(ctx, c, "hot", "c", 20*time.Second)
		cDone <- outcome{g, err}
	}()
	waitWaiters(t, locks, "hot", 2)
	if err := locks.Release(ctx, a, "hot"); err != nil {
		t.Fatal(err)
	}
	ob := <-bDone
	if ob.err != nil {
		t.Fatalf("b: %v", ob.err)
	}
	if ob.g.FencingToken <= ga.FencingToken {
		t.Fatalf("b's token %d not above a's %d", ob.g.FencingToken, ga.FencingToken)
	}
	select {
	case oc := <-cDone:
		t.Fatalf("c granted while b holds: %+v %v", oc.g, oc.err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := locks.Release(ctx, b, "hot"); err != nil {
		t.Fatal(err)
	}
	oc := <-cDone
	if oc.err != nil || oc.g.FencingToken <= ob.g.FencingToken {
		t.Fatalf("c: %+v %v, want a token above %d", oc.g, oc.err, ob.g.FencingToken)
	}
}

// waitWaiters waits until lock name has n waiters behind its holder.
func waitWaiters(t *testing.T, locks *Locks, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := locks.Inspect(context.Background(), name)
		if err == nil && st.Waiters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("lock %s: never %d waiters (%+v, %v)", name, n, st, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A lock parent made by someone else whose ACL lets us create children but not
// write the parent: acquires still work (without the stamp), with the czxid as
// token.
func TestLockUnderReadOnlyParent(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	for _, p := range []string{root, root + "/locks"} {
		if _, err := conn.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	parent := root + "/locks/guarded"
	if _, err := conn.Create(parent, []byte("theirs"), zk.FlagPersistent, zk.WorldACL(zk.PermRead|zk.PermCreate|zk.PermDelete)); err != nil {
		t.Fatal(err)
	}
	s := zookeepertest.NewSession(t, zkc.Servers(), root)
	leases := kit.NewLeases(s, nil)
	locks := New(s, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var last int64
	for range 2 {
		lease, err := leases.Grant(time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		g, err := locks.Acquire(ctx, lease, "guarded", "me", 0)
		if err != nil {
			t.Fatalf("acquire under a parent we cannot write: %v", err)
		}
		_, st, err := conn.Exists(g.node.Path)
		if err != nil || st == nil || st.Czxid != g.FencingToken || g.FencingToken <= last {
			t.Fatalf("token %d, node czxid %+v (%v), previous %d", g.FencingToken, st, err, last)
		}
		last = g.FencingToken
		if err := locks.Release(ctx, lease, "guarded"); err != nil {
			t.Fatal(err)
		}
	}
	if data, _, err := conn.Get(parent); err != nil || string(data) != "theirs" {
		t.Fatalf("parent data %q (%v): changed", data, err)
	}
}

// A release whose caller gives up while the session is suspended still deletes
// the node once the session is back: a node left behind would hold the line for
// the session's whole life.
func TestReleaseDeletesThroughSuspension(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := zookeepertest.NewSession(t, []string{proxy.Addr()}, root)
	leases := kit.NewLeases(s, nil)
	locks := New(s, prometheus.NewRegistry())
	lease, err := leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	g, err := locks.Acquire(context.Background(), lease, "cut", "me", 0)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for s.State() == zookeeper.StateConnected {
		<-s.Changed()
	}
	time.AfterFunc(500*time.Millisecond, proxy.Restore)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = locks.Release(ctx, lease, "cut") // the caller's deadline passes during the cut
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, _, err := conn.Exists(g.node.Path)
		if err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still there after the cut (%v)", g.node.Path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := s.State(); st != zookeeper.StateConnected {
		t.Fatalf("session %v, want connected (the cut was shorter than the timeout)", st)
	}
}

// A waiter whose predecessor is a node of this sidecar sets no ZooKeeper watch
// at first (it is told here when that node goes), yet sees every way the node
// can go: a release here (handed the lock at once), a waiter in front of it
// giving up here (it looks at the line again), and another client deleting the
// node (noticed through the watch it sets after line.LocalGrace).
func TestLocalPredecessorEveryWayOfGoing(t *testing.T) {
	zkc, root, locks, grant := newLockTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type outcome struct {
		g   *LockGrant
		err error
		at  time.Time
	}
	acquire := func(l *kit.Lease, name string, wait time.Duration) <-chan outcome {
		ch := make(chan outcome, 1)
		go func() {
			g, err := locks.Acquire(ctx, l, name, "o", wait)
			ch <- outcome{g, err, time.Now()}
		}()
		return ch
	}
	hold := func(l *kit.Lease, name string) *LockGrant {
		g, err := locks.Acquire(ctx, l, name, "o", 0)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}

	// Released here: handed over, and no watch was set while it waited.
	a := grant()
	ga := hold(a, "released")
	asked := time.Now()
	b := acquire(grant(), "released", 20*time.Second)
	waitWaiters(t, locks, "released", 1)
	// (Asserted only when the machine was quick enough to look within the grace.)
	if n := zktest.WatchedPaths(t, zkc.Server(0), root+"/locks/released"); n > 0 && time.Since(asked) < line.LocalGrace/2 {
		t.Errorf("%d watched paths on a local predecessor within its grace", n)
	}
	released := time.Now()
	if err := locks.Release(ctx, a, "released"); err != nil {
		t.Fatal(err)
	}
	ob := <-b
	if ob.err != nil || ob.g.FencingToken <= ga.FencingToken {
		t.Fatalf("after the release: %+v %v", ob.g, ob.err)
	}
	// (Without the handoff the watch set after the grace would grant it within
	// line.LocalGrace of the wait's start: a bound of line.LocalGrace/4 tells them apart.)
	if d := ob.at.Sub(released); d >= line.LocalGrace/4 {
		t.Errorf("handed over %s after the release, not at once", d)
	}

	// A waiter in front gives up here: the one behind it looks again, and is
	// handed the lock when the holder is released.
	h := grant()
	hold(h, "gaveup")
	quitter := acquire(grant(), "gaveup", 300*time.Millisecond)
	waitWaiters(t, locks, "gaveup", 1)
	c := acquire(grant(), "gaveup", 20*time.Second)
	waitWaiters(t, locks, "gaveup", 2)
	if oq := <-quitter; !errors.Is(oq.err, ErrLocked) {
		t.Fatalf("the quitter: %+v %v, want ErrLocked", oq.g, oq.err)
	}
	waitWaiters(t, locks, "gaveup", 1)
	released = time.Now()
	if err := locks.Release(ctx, h, "gaveup"); err != nil {
		t.Fatal(err)
	}
	oc := <-c
	if oc.err != nil {
		t.Fatalf("behind the quitter: %v", oc.err)
	}
	if d := oc.at.Sub(released); d >= line.LocalGrace/4 {
		t.Errorf("behind the quitter: granted %s after the release, not at once", d)
	}

	// Deleted by another client: noticed once the watch is set.
	gx := hold(grant(), "deleted")
	d := acquire(grant(), "deleted", 20*time.Second)
	waitWaiters(t, locks, "deleted", 1)
	conn := zktest.Connect(t, zkc.Servers(), 10*time.Second)
	if err := conn.Delete(gx.node.Path, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case od := <-d:
		if od.err != nil || od.g.FencingToken <= gx.FencingToken {
			t.Fatalf("after the outside delete: %+v %v", od.g, od.err)
		}
	case <-time.After(line.LocalGrace + 10*time.Second):
		t.Fatal("a predecessor deleted by another client was not noticed")
	}
}
