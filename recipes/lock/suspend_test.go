package lock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// suspendedCar is a session behind a fault proxy, with its leases and locks.
type suspendedCar struct {
	proxy  *faultproxy.Proxy
	s      *zookeeper.Session
	leases *kit.Leases
	locks  *Locks
}

func newSuspendedCar(t *testing.T, zkc *zktest.Cluster, root string, timeout time.Duration) *suspendedCar {
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := zookeepertest.Start(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Root: root, Timeout: timeout})
	leases := kit.NewLeases(s, nil)
	t.Cleanup(func() { leases.Close(); s.Close(); leases.Wait() })
	return &suspendedCar{proxy: proxy, s: s, leases: leases, locks: New(s, prometheus.NewRegistry())}
}

// cut cuts the session's connection and waits until it is suspended.
func (c *suspendedCar) cut(t *testing.T) {
	t.Helper()
	c.proxy.Cut()
	testutil.Eventually(t, 10*time.Second, "the session suspended", func() bool { return c.s.State() == zookeeper.StateSuspended })
}

// lockStates records a lock follower's states.
type lockStates struct {
	mu     sync.Mutex
	states []*LockState
}

func (r *lockStates) add(st *LockState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.states = append(r.states, st)
}

func (r *lockStates) all() []*LockState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*LockState(nil), r.states...)
}

// A suspension shorter than the point where the session could have expired
// loses nothing: the lease still holds the lock with the same fencing token,
// no loss is recorded on it, the node stands, and the lock's follower shows
// the suspension as exactly two states: the holder it knew, marked suspended
// (since when), then the same holder read again once the session is back.
func TestHoldAndFollowedLockThroughShortSuspension(t *testing.T) {
	zkc := zktest.Shared(t)
	// A 12 s timeout puts the doubt at least 8 s after the last answer, far
	// beyond the 3 s cut and the reconnect that follows it.
	car := newSuspendedCar(t, zkc, zktest.Root(t), 12*time.Second)
	lease, err := car.leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := car.locks.Acquire(ctx, lease, "kept", "me", 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := car.locks.Follow("kept")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	testutil.Eventually(t, 10*time.Second, "the follower's first state", func() bool {
		st, ok := f.State()
		return ok && st.Holder != nil && st.Holder.FencingToken == g.FencingToken
	})
	rec := &lockStates{}
	cancelSub := f.Subscribe(rec.add)
	defer cancelSub()
	ep, _ := car.s.Current()

	cutAt := time.Now()
	car.cut(t)
	time.Sleep(3*time.Second - time.Since(cutAt))
	car.proxy.Restore()
	testutil.Eventually(t, 20*time.Second, "the session connected again", func() bool { return car.s.State() == zookeeper.StateConnected })
	if cur, _ := car.s.Current(); cur != ep || ep.IsLost() || ep.Doubts() != 0 {
		t.Fatalf("epoch %p (was %p), lost %v, doubts %d: want the same session, never in doubt", cur, ep, ep.IsLost(), ep.Doubts())
	}
	testutil.Eventually(t, 10*time.Second, "the state read again", func() bool {
		st, _ := f.State()
		return !st.Suspended
	})
	time.Sleep(500 * time.Millisecond) // room for any stray state to show
	checkSuspensionStates(t, rec.all(), g.FencingToken, cutAt)
	if lost, _ := lease.LostHolds(0); len(lost) != 0 {
		t.Fatalf("holds lost: %+v", lost)
	}
	if held, ok := kit.Lookup[*LockGrant](lease, kit.Hold{Kind: lockKind, Name: "kept"}); !ok || held.FencingToken != g.FencingToken {
		t.Fatalf("lease's lock after the suspension: %+v %v", held, ok)
	}
	if _, st, err := ep.Exists(ctx, g.node.Path); err != nil || st == nil || st.EphemeralOwner != ep.ID() {
		t.Fatalf("lock node %s: %+v %v", g.node.Path, st, err)
	}
}

// checkSuspensionStates checks that a lock follower's states are the first one,
// one marked suspended since about cutAt and one read again after it, all with
// the holder of token.
func checkSuspensionStates(t *testing.T, states []*LockState, token int64, cutAt time.Time) {
	t.Helper()
	if len(states) != 3 {
		t.Fatalf("%d states, want the first, one suspended and one back: %+v", len(states), states)
	}
	susp, back := states[1], states[2]
	if !susp.Suspended || susp.SuspendedSince.IsZero() || susp.SuspendedSince.Before(cutAt.Add(-time.Second)) ||
		susp.Holder == nil || susp.Holder.FencingToken != token {
		t.Fatalf("state while suspended %+v (holder %+v), want the holder kept, suspended since the cut", susp, susp.Holder)
	}
	if back.Suspended || !back.SuspendedSince.IsZero() || back.Holder == nil || back.Holder.FencingToken != token {
		t.Fatalf("state after the suspension %+v", back)
	}
}

// checkLostAtDoubt checks, once ep is in doubt, that lease lost its lock name
// (and only that) while ep and the lease live, and that the lock's follower f
// vouches for no holder.
func checkLostAtDoubt(t *testing.T, ep *zookeeper.Epoch, lease *kit.Lease, f *kit.Follower[*LockState], name string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, "the lock reported lost on the lease", func() bool {
		lost, _ := lease.LostHolds(0)
		return len(lost) == 1 && lost[0].Hold == kit.Hold{Kind: lockKind, Name: name}
	})
	if ep.IsLost() || lease.Err() != nil {
		t.Fatalf("epoch lost %v, lease %v: a doubt loses the holds only", ep.IsLost(), lease.Err())
	}
	if _, ok := kit.Lookup[*LockGrant](lease, kit.Hold{Kind: lockKind, Name: name}); ok {
		t.Fatal("the lease still lists the lock")
	}
	testutil.Eventually(t, 10*time.Second, "the follower vouches for no holder", func() bool {
		st, _ := f.State()
		return st.Suspended && st.Holder == nil
	})
}

// A suspension that lasts until the session could have expired (2/3 of its
// timeout after ZooKeeper last answered) reports the lease's holds lost then,
// while the session is still suspended and ZooKeeper still holds it; the
// lease lives on. Once the same session is back, the lost lock's node is
// deleted at once, so a contender on another session is granted the lock
// while the first session still lives: nobody waited for an expiry.
func TestHoldsLostAtDoubtAndDeletedOnReturn(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	// 15 s: the doubt comes about 10 s after the last answer, the expiry no
	// sooner than 15 s after it, time enough to reconnect in between.
	car := newSuspendedCar(t, zkc, root, 15*time.Second)
	other := zookeepertest.NewSession(t, zkc.Servers(), root)
	otherLeases := kit.NewLeases(other, nil)
	t.Cleanup(func() { otherLeases.Close(); other.Close(); otherLeases.Wait() })
	otherLocks := New(other, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	lease, err := car.leases.Grant(5*time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	g, err := car.locks.Acquire(ctx, lease, "doubted", "first", 0)
	if err != nil {
		t.Fatal(err)
	}
	f, err := car.locks.Follow("doubted")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	otherLease, err := otherLeases.Grant(5*time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		g   *LockGrant
		err error
	}
	granted := make(chan outcome, 1)
	go func() {
		g, err := otherLocks.Acquire(ctx, otherLease, "doubted", "second", 80*time.Second)
		granted <- outcome{g, err}
	}()
	testutil.Eventually(t, 10*time.Second, "the contender waits", func() bool {
		st, err := car.locks.Inspect(ctx, "doubted")
		return err == nil && st.Waiters == 1
	})
	ep, _ := car.s.Current()
	doubted := ep.Doubted()

	car.cut(t)
	select {
	case <-doubted:
	case <-time.After(testutil.Patience(60 * time.Second)):
		t.Fatal("the session was never put in doubt")
	}
	checkLostAtDoubt(t, ep, lease, f, "doubted")
	if len(granted) != 0 {
		t.Fatalf("the contender was granted while the session was cut: %+v", <-granted)
	}

	car.proxy.Restore()
	var o outcome
	select {
	case o = <-granted:
	case <-time.After(testutil.Patience(60 * time.Second)):
		t.Fatal("the contender was never granted the lock")
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	if cur, _ := car.s.Current(); ep.IsLost() || cur != ep {
		t.Skipf("the session expired before it could reconnect (a very slow machine): the lock went by the expiry")
	}
	if o.g.FencingToken <= g.FencingToken {
		t.Fatalf("token %d not above the lost one %d", o.g.FencingToken, g.FencingToken)
	}
	if lease.Err() != nil {
		t.Fatalf("lease after the return: %v", lease.Err())
	}
	// The same lease may hold the lock again under the same session.
	if err := otherLocks.Release(ctx, otherLease, "doubted"); err != nil {
		t.Fatal(err)
	}
	if _, err := car.locks.Acquire(ctx, lease, "doubted", "first", 10*time.Second); err != nil {
		t.Fatalf("the lease takes the lock again: %v", err)
	}
}
