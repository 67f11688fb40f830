package throughput

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// summary is "limit: id=share ..." with a * after the leader's id.
func summary(g *ThroughputGroup) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", g.Limit)
	for _, m := range g.Members {
		star := ""
		if m.Leader {
			star = "*"
		}
		fmt.Fprintf(&b, " %s%s=%d", m.ID, star, m.Share)
	}
	return b.String()
}

// awaitSummary waits until side's follower of group shows want.
func awaitSummary(t *testing.T, side *tpSide, group, want string) *ThroughputGroup {
	t.Helper()
	f, err := side.tp.Follow(group)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g, ok := await(context.Background(), f, 10*time.Second, func(g *ThroughputGroup) bool { return summary(g) == want })
	if !ok {
		got := "nothing"
		if g != nil {
			got = summary(g)
		}
		t.Fatalf("never saw %q; last %q", want, got)
	}
	return g
}

// The scenario of the API's test at the recipe's level: members on two
// sidecars, the first one leading, the next taking over when it goes, a new
// limit, updates, and a group published empty when everyone left. The led
// gauge follows the leader, and drops when the last follower closes.
func TestThroughputScenarioOnTheKit(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	sc := &tpScenario{a: newTPSide(t, zkc.Servers(), root), b: newTPSide(t, zkc.Servers(), root)}
	if _, err := sc.a.tp.SetLimit(context.Background(), scenarioGroup, 1000); err != nil {
		t.Fatal(err)
	}
	sc.l1 = sc.a.join(t, scenarioGroup, "m1")
	sc.l2 = sc.b.join(t, scenarioGroup, "m2")
	sc.joined(t)
	sc.demand(t)
	st := sc.takeover(t)
	sc.everyoneLeaves(t, st)
}

// scenarioGroup is the group of TestThroughputScenarioOnTheKit.
const scenarioGroup = "scenario"

// tpScenario is what TestThroughputScenarioOnTheKit carries from step to step:
// the sidecars a and b, and the leases of m1 (on a) and m2 (on b).
type tpScenario struct {
	a, b   *tpSide
	l1, l2 *kit.Lease
}

// joined: both sidecars show m1 leading, a leads, and a member cannot be joined twice.
func (sc *tpScenario) joined(t *testing.T) {
	t.Helper()
	a, b, g, ctx := sc.a, sc.b, scenarioGroup, context.Background()
	awaitSummary(t, a, g, "1000: m1*=500 m2=500")
	awaitSummary(t, b, g, "1000: m1*=500 m2=500")
	if led := testutil.ToFloat64(a.tp.metrics.led); led != 1 {
		t.Fatalf("a leads %v groups", led)
	}
	// A second join of m2 by its lease, or by another one, is refused.
	if _, err := b.tp.Join(ctx, sc.l2, g, "m2", 1); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("second join by the same lease: %v", err)
	}
	if _, err := a.tp.Join(ctx, sc.l1, g, "m2", 1); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("second join by another lease: %v", err)
	}
}

// demand: m2 asks for 100 and gets it once the leader publishes.
func (sc *tpScenario) demand(t *testing.T) {
	t.Helper()
	a, b, g, ctx := sc.a, sc.b, scenarioGroup, context.Background()
	demand := int64(100)
	sh, err := b.tp.Update(ctx, sc.l2, g, "m2", nil, &demand)
	if err != nil || sh.Share != 100 {
		t.Fatalf("update answered %+v, %v", sh, err)
	}
	if _, err := a.tp.Update(ctx, sc.l1, g, "m2", nil, nil); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("update by a lease without the member: %v", err)
	}
	awaitSummary(t, b, g, "1000: m1*=900 m2=100")
}

// takeover: m1 leaves, m2's sidecar takes over (a long-poll on the version
// before answers), and a new limit is published. It returns the group as the
// new leader first published it.
func (sc *tpScenario) takeover(t *testing.T) *ThroughputGroup {
	t.Helper()
	a, b, g, ctx := sc.a, sc.b, scenarioGroup, context.Background()
	// A long-poll on the current version answers when the next one is published.
	cur, err := b.tp.Member(ctx, g, "m2")
	if err != nil {
		t.Fatal(err)
	}
	polled := make(chan *ThroughputShare, 1)
	go func() {
		sh, _ := b.tp.AwaitMember(ctx, g, "m2", cur.Version, 10*time.Second)
		polled <- sh
	}()

	// m1 leaves: m2's sidecar takes over.
	if err := a.tp.Leave(ctx, sc.l1, g, "m1"); err != nil {
		t.Fatal(err)
	}
	if err := a.tp.Leave(ctx, sc.l1, g, "m1"); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("second leave: %v", err)
	}
	st := awaitSummary(t, a, g, "1000: m2*=1000")
	if sh := <-polled; sh == nil || sh.Version <= cur.Version {
		t.Fatalf("long-poll answered %+v after version %d", sh, cur.Version)
	}
	if led := testutil.ToFloat64(b.tp.metrics.led); led != 1 {
		t.Fatalf("b leads %v groups", led)
	}
	if led := testutil.ToFloat64(a.tp.metrics.led); led != 0 {
		t.Fatalf("a still leads %v groups", led)
	}
	if _, err := a.tp.SetLimit(ctx, g, 500); err != nil {
		t.Fatal(err)
	}
	awaitSummary(t, a, g, "500: m2*=500")
	return st
}

// everyoneLeaves: the group is published empty, with no leader, later than st;
// nothing is followed or led any more, and the group is still listed.
func (sc *tpScenario) everyoneLeaves(t *testing.T, st *ThroughputGroup) {
	t.Helper()
	a, b, g, ctx := sc.a, sc.b, scenarioGroup, context.Background()
	if err := b.leases.Revoke(sc.l2.ID); err != nil {
		t.Fatal(err)
	}
	end := awaitSummary(t, a, g, "500:")
	if end.Leader != "" || end.Version <= st.Version || end.Term < st.Term {
		t.Fatalf("empty group %+v after %+v", end, st)
	}
	if _, err := a.tp.Member(ctx, g, "m2"); !errors.Is(err, ErrMemberNotFound) {
		t.Fatalf("member after its lease ended: %v", err)
	}
	if n := a.tp.followers.Len() + b.tp.followers.Len(); n != 0 {
		t.Fatalf("%d groups still followed", n)
	}
	if led := testutil.ToFloat64(b.tp.metrics.led) + testutil.ToFloat64(b.tp.metrics.members); led != 0 {
		t.Fatalf("b's gauges: %v", led)
	}
	names, err := a.tp.List(ctx)
	if err != nil || len(names) != 1 || names[0] != g {
		t.Fatalf("List = %v, %v", names, err)
	}
}

// A member joined with an implicit lease ends that lease when it leaves.
func TestThroughputImplicitLeaseEndsOnLeave(t *testing.T) {
	zkc := zktest.Shared(t)
	a := newTPSide(t, zkc.Servers(), zktest.Root(t))
	ctx := context.Background()
	l, err := a.leases.Grant(time.Minute, true)
	if err != nil {
		t.Fatal(err)
	}
	sh, err := a.tp.Join(ctx, l, "il", "m1", 1)
	if err != nil || sh.Lease != l.ID {
		t.Fatalf("join answered %+v, %v", sh, err)
	}
	if err := a.tp.Leave(ctx, l, "il", "m1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.leases.Get(l.ID); !errors.Is(err, kit.ErrLeaseNotFound) {
		t.Fatalf("the implicit lease lives on: %v", err)
	}
	if _, err := a.tp.Member(ctx, "il", "m1"); !errors.Is(err, ErrMemberNotFound) {
		t.Fatalf("member after leave: %v", err)
	}
}

// While the session is suspended the group shows its last state as Suspended
// and this sidecar does not lead; after the session is back the same state is
// read again, and after a new session the caches are read from scratch (the
// member of the lost session is gone, the group published empty).
func TestThroughputFollowerThroughSessionTrouble(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	a := newTPSide(t, []string{proxy.Addr()}, root)
	ctx := context.Background()
	const g = "trouble"
	if _, err := a.tp.SetLimit(ctx, g, 10); err != nil {
		t.Fatal(err)
	}
	l := a.join(t, g, "m1")
	f, err := a.tp.Follow(g)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := awaitSummary(t, a, g, "10: m1*=10")
	led := func() float64 { return testutil.ToFloat64(a.tp.metrics.led) }
	if led() != 1 {
		t.Fatal("not leading")
	}

	suspendAndRestore(t, proxy, f, a, before)
	loseSession(t, zkc.Servers(), proxy, f, a, l, before)
}

// suspendAndRestore cuts a's connection until f shows the group suspended, as
// it was before and not led by a, then restores it until f shows the same state
// again, led by a.
func suspendAndRestore(t *testing.T, proxy *faultproxy.Proxy, f *ThroughputFollower, a *tpSide, before *ThroughputGroup) {
	t.Helper()
	led := func() float64 { return testutil.ToFloat64(a.tp.metrics.led) }
	ctx := context.Background()
	proxy.Cut()
	st, ok := f.Await(ctx, 10*time.Second, func(g *ThroughputGroup) bool { return g.Suspended })
	if !ok || st.Version != before.Version || summary(st) != "10: m1*=10" || led() != 0 {
		t.Fatalf("suspended: %+v, led %v", st, led())
	}
	proxy.Restore()
	st, ok = f.Await(ctx, 10*time.Second, func(g *ThroughputGroup) bool { return !g.Suspended })
	// The read that published it decided to lead first.
	if !ok || st.Version != before.Version || summary(st) != "10: m1*=10" || led() != 1 {
		t.Fatalf("back: %+v, led %v", st, led())
	}
}

// loseSession cuts a's connection until ZooKeeper has expired its session, and
// with it lease l: l's member goes, the new session reads from scratch, and f
// shows the group empty, unled and later than before.
func loseSession(t *testing.T, servers []string, proxy *faultproxy.Proxy, f *ThroughputFollower, a *tpSide, l *kit.Lease, before *ThroughputGroup) {
	t.Helper()
	led := func() float64 { return testutil.ToFloat64(a.tp.metrics.led) }
	zookeepertest.Expire(t, a.s, servers, proxy.Cut, proxy.Restore)
	select {
	case <-l.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the lease outlived its session")
	}
	st, ok := await(context.Background(), f, 20*time.Second, func(g *ThroughputGroup) bool { return len(g.Members) == 0 })
	if !ok || st.Leader != "" || st.Version <= before.Version || st.Live("m1") {
		t.Fatalf("after the session was lost: %+v", st)
	}
	if led() != 0 || testutil.ToFloat64(a.tp.metrics.members) != 0 {
		t.Fatalf("gauges: led %v, members %v", led(), testutil.ToFloat64(a.tp.metrics.members))
	}
}
