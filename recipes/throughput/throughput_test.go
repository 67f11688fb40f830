package throughput

import (
	"context"
	"encoding/json"
	"errors"
	"path"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// tpSide is one sidecar's worth of recipes on its own session.
type tpSide struct {
	s      *zookeeper.Session
	leases *kit.Leases
	tp     *Throughputs
}

func newTPSide(t *testing.T, servers []string, root string) *tpSide {
	t.Helper()
	s := newTestSession(t, servers, root)
	side := &tpSide{s: s, leases: kit.NewLeases(s, nil), tp: New(s, nil)}
	t.Cleanup(side.leases.Close)
	return side
}

func (side *tpSide) join(t *testing.T, group, id string) *kit.Lease {
	t.Helper()
	l, err := side.leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := side.tp.Join(context.Background(), l, group, id, 1); err != nil {
		t.Fatal(err)
	}
	return l
}

// readAlloc reads the allocation node with a plain client.
func readAlloc(t *testing.T, conn *zk.Conn, p string) (*allocationData, int32) {
	t.Helper()
	data, st, err := conn.Get(p)
	if err != nil {
		t.Fatal(err)
	}
	a, err := decodeAllocation(data)
	if err != nil {
		t.Fatal(err)
	}
	return a, st.Version
}

// awaitLeader waits until the published allocation is led by id.
func awaitLeader(t *testing.T, tp *Throughputs, group, id string) *ThroughputGroup {
	t.Helper()
	f, err := tp.Follow(group)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, ok := await(context.Background(), f, 10*time.Second, func(g *ThroughputGroup) bool { return g.Leader == id })
	if !ok {
		t.Fatalf("%s never led; last state %+v", id, g)
	}
	return g
}

// A member that no longer leads can never write an allocation: not over a
// higher term, and not with a leader node that is gone (the transaction's
// check fails), even with the current node version.
func TestThroughputStaleWritesRefused(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newTPSide(t, zkc.Servers(), root)
	b := newTPSide(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	const g = "stale"
	if _, err := a.tp.SetLimit(ctx, g, 100); err != nil {
		t.Fatal(err)
	}
	l1 := a.join(t, g, "m1")
	b.join(t, g, "m2")
	awaitLeader(t, a.tp, g, "m1")
	ap := a.tp.groupPath(g) + "/allocation"
	old, _ := readAlloc(t, conn, ap)
	if old.Members[0].Share != 50 || old.Term == 0 {
		t.Fatalf("allocation %+v", old)
	}

	// m1 leaves; m2's side takes over with a higher term.
	if err := a.leases.Revoke(l1.ID); err != nil {
		t.Fatal(err)
	}
	st := awaitLeader(t, b.tp, g, "m2")
	cur, ver := readAlloc(t, conn, ap)
	if cur.Term <= old.Term || cur.Version != st.Version || cur.Members[0].Share != 100 {
		t.Fatalf("after the handoff: %+v (old term %d)", cur, old.Term)
	}
	ep, _ := a.s.Current()

	// The old leader's allocation, term below the current one: refused.
	stale := &allocationData{Leader: "m1", LeaderNode: old.LeaderNode, Term: old.Term, Limit: 100,
		Members: []allocatedMember{{Node: old.LeaderNode, ID: "m1", Weight: 1, Share: 100}}}
	if _, err := writeAllocation(ctx, ep, ap, cur, ver, stale); !errors.Is(err, errStaleTerm) {
		t.Fatalf("write under a lower term: %v", err)
	}
	// Claiming the higher term with a leader node that is gone: ZooKeeper refuses
	// the transaction as a whole.
	stale.Term = cur.Term + 1
	if _, err := writeAllocation(ctx, ep, ap, cur, ver, stale); !errors.Is(err, zk.ErrNoNode) {
		t.Fatalf("write by a leader whose node is gone: %v", err)
	}
	if after, v := readAlloc(t, conn, ap); v != ver || after.Version != cur.Version {
		t.Fatalf("the allocation changed: %+v", after)
	}
}

// Writers racing from the same version: exactly one wins, and the version
// grows by one.
func TestThroughputConcurrentWritesOneWins(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newTPSide(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	const g = "race"
	if _, err := a.tp.SetLimit(ctx, g, 7); err != nil {
		t.Fatal(err)
	}
	ap := a.tp.groupPath(g) + "/allocation"
	prev, ver := readAlloc(t, conn, ap)
	ep, _ := a.s.Current()
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			p := *prev
			_, errs[i] = writeAllocation(ctx, ep, ap, &p, ver, compute(7, nil))
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, zk.ErrBadVersion):
			t.Fatalf("unexpected error %v", err)
		}
	}
	if after, _ := readAlloc(t, conn, ap); won != 1 || after.Version != prev.Version+1 {
		t.Fatalf("%d writers won; version %d after %d", won, after.Version, prev.Version)
	}
}

// However many followers a group has on one sidecar, the sidecar holds one
// watcher for it: the watches the server holds are the same for 1 and for 100.
func TestThroughputOneWatcherPerGroup(t *testing.T) {
	zkc := zktest.Shared(t)
	if len(zkc.Servers()) != 1 {
		t.Skip("counts watches on one server")
	}
	root := zktest.Root(t)
	a := newTPSide(t, zkc.Servers(), root)
	const g = "crowd"
	a.join(t, g, "m1")
	a.join(t, g, "m2")
	gp := a.tp.groupPath(g)
	// The group, the allocation, and the two members' data (the watch on the
	// allocation is re-armed once the leader's own write fired it).
	const one = 4
	deadline := time.Now().Add(10 * time.Second)
	for n := 0; n != one; n = zktest.WatchedPaths(t, zkc.Server(0), gp) {
		if time.Now().After(deadline) {
			t.Fatalf("%d watched paths for one watcher, want %d", n, one)
		}
		time.Sleep(10 * time.Millisecond)
	}
	fs := make([]*ThroughputFollower, 100)
	for i := range fs {
		f, err := a.tp.Follow(g)
		if err != nil {
			t.Fatal(err)
		}
		fs[i] = f
		if _, ok := await(context.Background(), f, 5*time.Second, func(*ThroughputGroup) bool { return true }); !ok {
			t.Fatal("no state")
		}
	}
	if n := zktest.WatchedPaths(t, zkc.Server(0), gp); n != one {
		t.Fatalf("watched paths: %d with one follower, %d with 100", one, n)
	}
	watchers := a.tp.followers.Len()
	if watchers != 1 {
		t.Fatalf("%d watchers for one group", watchers)
	}
	for _, f := range fs {
		f.Close()
	}
}

// A member's data is the JSON the layout documents, and a foreign member node
// counts as a member of weight 1 named after its node.
func TestThroughputMemberNodes(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newTPSide(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()
	const g = "layout"
	if _, err := a.tp.SetLimit(ctx, g, 10); err != nil {
		t.Fatal(err)
	}
	a.join(t, g, "m1")
	mp := a.tp.groupPath(g) + "/members"
	children, _, err := conn.Children(mp)
	if err != nil || len(children) != 1 {
		t.Fatalf("members %v %v", children, err)
	}
	data, _, _ := conn.Get(path.Join(mp, children[0]))
	var m memberData
	if json.Unmarshal(data, &m) != nil || m.ID != "m1" || m.Weight != 1 || m.Demand != nil {
		t.Fatalf("member data %s", data)
	}
	foreign, err := conn.Create(mp+"/foreign-", []byte("not json"), zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	f, _ := a.tp.Follow(g)
	defer f.Close()
	st, ok := await(ctx, f, 10*time.Second, func(g *ThroughputGroup) bool { return len(g.Members) == 2 })
	if !ok || st.Members[0].Share != 5 || st.Members[1].ID != path.Base(foreign) || st.Members[1].Share != 5 {
		t.Fatalf("with a foreign member: %+v", st)
	}
}
