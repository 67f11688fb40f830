package recipes

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Two creates under one parent never share a transaction (they would share a
// czxid); requests are taken in arrival order and within the bounds.
func TestTakeTxnKeepsSiblingsApart(t *testing.T) {
	req := func(key string, ops int) *txnReq {
		r := &txnReq{key: key, bytes: 100 * ops}
		for range ops {
			r.ops = append(r.ops, &zk.DeleteRequest{})
		}
		return r
	}
	cases := []struct {
		name    string
		pending []*txnReq
		want    int
	}{
		{"distinct parents", []*txnReq{req("/a", 2), req("/b", 2), req("", 1), req("/c", 2)}, 4},
		{"sibling stops the batch", []*txnReq{req("/a", 2), req("/b", 2), req("/a", 2), req("/c", 2)}, 2},
		{"deletes join anything", []*txnReq{req("", 1), req("", 1), req("/a", 2), req("", 1)}, 4},
		{"op bound", []*txnReq{req("", maxTxnOps-1), req("", 2)}, 1},
		{"one over the bound still goes", []*txnReq{req("", maxTxnOps+5)}, 1},
	}
	for _, c := range cases {
		if got := takeTxn(c.pending); got != c.want {
			t.Errorf("%s: takeTxn = %d, want %d", c.name, got, c.want)
		}
	}
}

// Concurrent stamped creates, many of them sharing transactions: each answer
// carries its own node's czxid and tells alone-ness right, siblings never share a
// czxid, and a refused op in a shared transaction fails only its own caller.
func TestSharedTransactionsKeepEachOutcome(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := newTestSession(t, zkc.Servers(), root)
	ep, err := s.current()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const distinct, siblings, refused = 40, 10, 10
	type result struct {
		parent string
		c      created
		err    error
	}
	results := make(chan result, distinct+siblings)
	refusals := make(chan error, refused)
	var wg sync.WaitGroup
	for i := range distinct + siblings {
		parent := path.Join(root, "locks", fmt.Sprintf("p%d", i))
		if i >= distinct {
			parent = path.Join(root, "locks", "shared")
		}
		wg.Go(func() {
			c, err := createProtected(ctx, ep, parent, newGUID(), "lock-", nil, true)
			results <- result{parent, c, err}
		})
	}
	for i := range refused {
		wg.Go(func() {
			_, err := ep.multi(ctx, "", &zk.DeleteRequest{Path: path.Join(root, fmt.Sprintf("missing-%d", i)), Version: -1})
			refusals <- err
		})
	}
	wg.Wait()
	close(results)
	close(refusals)
	for err := range refusals {
		if !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("delete of a missing node: %v, want ErrNoNode", err)
		}
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	sharedCzxids := map[int64]bool{}
	alone := map[string]int{}
	for r := range results {
		if r.err != nil {
			t.Fatalf("create under %s: %v", r.parent, r.err)
		}
		_, st, err := conn.Exists(r.c.Path)
		if err != nil || st == nil {
			t.Fatalf("exists %s: %v", r.c.Path, err)
		}
		if r.c.Czxid != st.Czxid {
			t.Errorf("%s: stamped czxid %d, node's czxid %d", r.c.Path, r.c.Czxid, st.Czxid)
		}
		if r.c.Alone {
			alone[r.parent]++
		}
		if path.Base(r.parent) == "shared" {
			if sharedCzxids[st.Czxid] {
				t.Errorf("two siblings under %s share czxid %d", r.parent, st.Czxid)
			}
			sharedCzxids[st.Czxid] = true
		}
	}
	txns, requests := testutil.ToFloat64(s.metrics.txns), testutil.ToFloat64(s.metrics.txnRequests)
	t.Logf("%v requests in %v shared transactions", requests, txns)
	if txns >= requests {
		t.Errorf("%v requests in %v transactions: none was shared", requests, txns)
	}
	for i := range distinct {
		if p := path.Join(root, "locks", fmt.Sprintf("p%d", i)); alone[p] != 1 {
			t.Errorf("%s: %d creates reported alone, want 1", p, alone[p])
		}
	}
	if p := path.Join(root, "locks", "shared"); alone[p] != 1 {
		t.Errorf("%s: %d of %d siblings reported alone, want 1", p, alone[p], siblings)
	}
}

// A waiter on this sidecar is handed the lock when its predecessor, the holder,
// is released here, and its token is higher; the waiter behind it waits until
// that new holder is released in turn.
func TestLocalHandoffGrantsTheSuccessor(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := newTestSession(t, zkc.Servers(), root)
	leases := NewLeases(s, nil)
	locks := NewLocks(s, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	grant := func() *Lease {
		l, err := leases.Grant(time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
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
	s := newTestSession(t, zkc.Servers(), root)
	leases := NewLeases(s, nil)
	locks := NewLocks(s, prometheus.NewRegistry())
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
		_, st, err := conn.Exists(g.node)
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
	proxy, err := faultproxy.New(zkc.Server(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s := newTestSession(t, []string{proxy.Addr()}, root)
	leases := NewLeases(s, nil)
	locks := NewLocks(s, prometheus.NewRegistry())
	lease, err := leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	g, err := locks.Acquire(context.Background(), lease, "cut", "me", 0)
	if err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	for s.State() == StateConnected {
		<-s.Changed()
	}
	time.AfterFunc(500*time.Millisecond, proxy.Restore)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = locks.Release(ctx, lease, "cut") // the caller's deadline passes during the cut
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, _, err := conn.Exists(g.node)
		if err == nil && !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still there after the cut (%v)", g.node, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st := s.State(); st != StateConnected {
		t.Fatalf("session %v, want connected (the cut was shorter than the timeout)", st)
	}
}
