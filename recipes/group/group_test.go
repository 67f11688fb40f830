package group

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// sidecar is what one sidecar has of the groups: its session, leases, groups
// and metrics.
type sidecar struct {
	s      *zookeeper.Session
	leases *kit.Leases
	groups *Groups
	reg    *prometheus.Registry
}

// world is one test's own root on the shared ZooKeeper: its sidecars are made
// on it, and a plain client looks at its nodes as Curator would.
type world struct {
	t    *testing.T
	zkc  *zktest.Cluster
	root string
}

func newWorld(t *testing.T) *world {
	return &world{t: t, zkc: zktest.Shared(t), root: zktest.Root(t)}
}

// sidecar is a sidecar on a session of its own under the world's root.
func (w *world) sidecar() *sidecar {
	w.t.Helper()
	return startSidecar(w.t, zookeeper.Config{Servers: w.zkc.Servers(), Root: w.root})
}

// client is a plain go-zookeeper session, closed when the test ends.
func (w *world) client() *zk.Conn { return zktest.Connect(w.t, w.zkc.Servers(), 5*time.Second) }

// group is the path of group g's node.
func (w *world) group(g string) string { return w.root + "/groups/" + g }

// startSidecar is a sidecar on a session made with cfg; its leases are revoked
// when t ends, before its session is closed.
func startSidecar(t *testing.T, cfg zookeeper.Config) *sidecar {
	t.Helper()
	s := zookeepertest.Start(t, cfg)
	reg := prometheus.NewRegistry()
	leases := kit.NewLeases(s, reg)
	t.Cleanup(leases.Close)
	return &sidecar{s: s, leases: leases, groups: New(s, reg), reg: reg}
}

func (sc *sidecar) lease(t *testing.T, ttl time.Duration, implicit bool) *kit.Lease {
	t.Helper()
	l, err := sc.leases.Grant(ttl, implicit)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (sc *sidecar) join(t *testing.T, l *kit.Lease, group, id, value string) {
	t.Helper()
	if _, err := sc.groups.Join(context.Background(), l, group, id, value); err != nil {
		t.Fatalf("join %s/%s: %v", group, id, err)
	}
}

func (sc *sidecar) inspect(t *testing.T, group string) *State {
	t.Helper()
	st, err := sc.groups.Inspect(context.Background(), group)
	if err != nil {
		t.Fatalf("inspect %s: %v", group, err)
	}
	return st
}

func (sc *sidecar) metric(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := testutil.MetricValue(t, sc.reg, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return v
}

// summary is "id=value id=value" of a state's members, in its order.
func summary(st *State) string {
	parts := make([]string, 0, len(st.Members))
	for _, m := range st.Members {
		parts = append(parts, m.ID+"="+m.Value)
	}
	return strings.Join(parts, " ")
}

// curatorMembers reads a group as Curator's GroupMember.getCurrentMembers does,
// with a plain client: every child of the group node is a member, its name the
// id and its data the value.
func curatorMembers(t *testing.T, conn *zk.Conn, groupPath string) map[string]string {
	t.Helper()
	names, _, err := conn.Children(groupPath)
	if errors.Is(err, zk.ErrNoNode) {
		return map[string]string{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		data, _, err := conn.Get(groupPath + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(data)
	}
	return out
}

// zkVersion is a group's version as ZooKeeper has it, read with a plain client
// by the package doc's rule: the highest of the group node's pzxid and its
// members' mzxids.
func zkVersion(t *testing.T, conn *zk.Conn, groupPath string) int64 {
	t.Helper()
	names, st, err := conn.Children(groupPath)
	if err != nil {
		t.Fatal(err)
	}
	v := st.Pzxid
	for _, n := range names {
		if !kit.ValidName(n) {
			continue
		}
		_, mst, err := conn.Get(groupPath + "/" + n)
		if err != nil {
			t.Fatal(err)
		}
		v = max(v, mst.Mzxid)
	}
	return v
}

func exists(t *testing.T, conn *zk.Conn, p string) bool {
	t.Helper()
	ok, _, err := conn.Exists(p)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// ended reports whether the lease has ended, without waiting.
func ended(l *kit.Lease) bool {
	select {
	case <-l.Done():
		return true
	default:
		return false
	}
}

// A join makes the node a Curator GroupMember makes and reads: the ephemeral
// node <root>/groups/<group>/<id> of the sidecar's session holding the value's
// bytes (ZooKeeper shows no client that the group node is a container); the
// lease holds "group" <group>/<id>. A value change rewrites the node in place
// (testSetValue); a leave deletes it at once, takes it off the lease and ends
// an implicit lease (testLeave).
func TestJoinSetValueLeaveAsCuratorSeesThem(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar()
	conn := w.client()
	gp := w.group("workers")

	l := sc.lease(t, time.Minute, false)
	j, err := sc.groups.Join(context.Background(), l, "workers", "w1", "10.0.0.1:80")
	if err != nil || *j != (Joined{Group: "workers", ID: "w1", Lease: l.ID}) {
		t.Fatalf("join: %+v %v", j, err)
	}
	data, st, err := conn.Get(gp + "/w1")
	if err != nil || string(data) != "10.0.0.1:80" || st.EphemeralOwner != l.Epoch().ID() {
		t.Fatalf("member node: %q owner 0x%x (%v), want the value, owned by session 0x%x", data, st.EphemeralOwner, err, l.Epoch().ID())
	}
	if got := curatorMembers(t, conn, gp); len(got) != 1 || got["w1"] != "10.0.0.1:80" {
		t.Fatalf("as Curator reads it: %v", got)
	}
	if h := l.Holds(); len(h) != 1 || h[0] != (kit.Hold{Kind: MemberKind, Name: "workers/w1"}) {
		t.Fatalf("holds %v", h)
	}
	if v := sc.metric(t, "coord_group_members"); v != 1 {
		t.Fatalf("coord_group_members %v, want 1", v)
	}
	in := sc.inspect(t, "workers")
	if summary(in) != "w1=10.0.0.1:80" || in.Version != zkVersion(t, conn, gp) || in.Suspended ||
		!in.Members[0].Since.Equal(time.UnixMilli(st.Ctime)) {
		t.Fatalf("inspect %+v, want w1 since the node's ctime %d at version %d", in, st.Ctime, zkVersion(t, conn, gp))
	}
	changed := testSetValue(t, sc, conn, l, gp, in)
	testLeave(t, sc, conn, l, gp, changed)
}

// testSetValue: SetValue rewrites w1's node in place (same czxid), the version
// goes up and the join time stays. It returns the group after it.
func testSetValue(t *testing.T, sc *sidecar, conn *zk.Conn, l *kit.Lease, gp string, before *State) *State {
	t.Helper()
	_, st, err := conn.Get(gp + "/w1")
	if err != nil {
		t.Fatal(err)
	}
	if err := sc.groups.SetValue(context.Background(), l, "workers", "w1", "10.0.0.2:80"); err != nil {
		t.Fatal(err)
	}
	data, st2, err := conn.Get(gp + "/w1")
	if err != nil || string(data) != "10.0.0.2:80" || st2.Czxid != st.Czxid {
		t.Fatalf("after SetValue: %q czxid %d (%v), want the new value in the same node (czxid %d)", data, st2.Czxid, err, st.Czxid)
	}
	changed := sc.inspect(t, "workers")
	if summary(changed) != "w1=10.0.0.2:80" || changed.Version <= before.Version || !changed.Members[0].Since.Equal(before.Members[0].Since) {
		t.Fatalf("inspect after SetValue %+v, want the new value, a higher version than %d, the same join time", changed, before.Version)
	}
	return changed
}

// testLeave: w1's leave deletes its node at once and takes it off the
// (explicit, still live) lease, the version goes up; a second leave and a
// SetValue answer ErrNotHeld. An implicit lease ends with its member's leave.
func testLeave(t *testing.T, sc *sidecar, conn *zk.Conn, l *kit.Lease, gp string, before *State) {
	t.Helper()
	ctx := context.Background()
	if err := sc.groups.Leave(ctx, l, "workers", "w1"); err != nil {
		t.Fatal(err)
	}
	if exists(t, conn, gp+"/w1") {
		t.Fatal("member node outlived the leave")
	}
	if h := l.Holds(); len(h) != 0 || ended(l) {
		t.Fatalf("after the leave: holds %v, lease ended %v; want none, an explicit lease live", h, ended(l))
	}
	if v := sc.metric(t, "coord_group_members"); v != 0 {
		t.Fatalf("coord_group_members %v after the leave, want 0", v)
	}
	left := sc.inspect(t, "workers")
	if len(left.Members) != 0 || left.Version <= before.Version {
		t.Fatalf("inspect after the leave %+v, want no member at a version above %d", left, before.Version)
	}
	if err := sc.groups.Leave(ctx, l, "workers", "w1"); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("second leave: %v, want ErrNotHeld", err)
	}
	if err := sc.groups.SetValue(ctx, l, "workers", "w1", "x"); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("SetValue after the leave: %v, want ErrNotHeld", err)
	}

	il := sc.lease(t, time.Minute, true)
	sc.join(t, il, "workers", "w2", "")
	if err := sc.groups.Leave(ctx, il, "workers", "w2"); err != nil {
		t.Fatal(err)
	}
	if !ended(il) || !errors.Is(il.Err(), kit.ErrLeaseRevoked) || exists(t, conn, gp+"/w2") {
		t.Fatalf("implicit lease after the leave: ended %v (%v), node there %v", ended(il), il.Err(), exists(t, conn, gp+"/w2"))
	}
}

// Members are listed in join order (not by name, nor as ZooKeeper lists the
// children), with the same list and version on every sidecar, and the version
// ZooKeeper's stats give; it strictly increases with every join, change of
// value and leave. List names the groups that have a node, sorted.
func TestJoinOrderAndVersionOnEverySidecar(t *testing.T) {
	w := newWorld(t)
	a := w.sidecar()
	b := w.sidecar()
	conn := w.client()
	ctx := context.Background()
	gp := w.group("g")

	la, lb := a.lease(t, time.Minute, false), b.lease(t, time.Minute, false)
	var last int64
	step := func(what, want string) {
		t.Helper()
		sa, sb := a.inspect(t, "g"), b.inspect(t, "g")
		if summary(sa) != want || summary(sb) != want {
			t.Fatalf("%s: sidecar a lists %q, b %q; want %q", what, summary(sa), summary(sb), want)
		}
		if sa.Version != sb.Version || sa.Version != zkVersion(t, conn, gp) || sa.Version <= last {
			t.Fatalf("%s: versions a %d, b %d, ZooKeeper %d; want all equal and above %d", what, sa.Version, sb.Version, zkVersion(t, conn, gp), last)
		}
		last = sa.Version
	}
	a.join(t, la, "g", "c", "1")
	step("c joined", "c=1")
	b.join(t, lb, "g", "a", "2")
	step("a joined on another sidecar", "c=1 a=2")
	a.join(t, la, "g", "b", "3")
	step("b joined", "c=1 a=2 b=3")
	if err := b.groups.SetValue(ctx, lb, "g", "a", "22"); err != nil {
		t.Fatal(err)
	}
	step("a's value changed: its place kept", "c=1 a=22 b=3")
	if err := a.groups.Leave(ctx, la, "g", "c"); err != nil {
		t.Fatal(err)
	}
	step("c left", "a=22 b=3")

	// List: the groups with a node, sorted; one never joined is not there.
	a.join(t, la, "f", "x", "")
	if names, err := b.groups.List(ctx); err != nil || !slices.Equal(names, []string{"f", "g"}) {
		t.Fatalf("list: %v %v, want [f g]", names, err)
	}
	if st := a.inspect(t, "never"); len(st.Members) != 0 || st.Members == nil || st.Version != 0 {
		t.Fatalf("a group without a node: %+v, want no members at version 0", st)
	}
}

// ErrMemberExists for an id the group has live already: held by the same lease
// (which keeps it), by another lease of this sidecar, by another sidecar, or
// placed by a Curator GroupMember; no refusal touches the member. A refused
// implicit lease ends; once the member leaves, the id is free again.
func TestJoinRefusesALiveID(t *testing.T) {
	w := newWorld(t)
	a := w.sidecar()
	b := w.sidecar()
	conn := w.client()
	ctx := context.Background()
	gp := w.group("g")

	l1 := a.lease(t, time.Minute, false)
	a.join(t, l1, "g", "m", "mine")
	_, st, err := conn.Get(gp + "/m")
	if err != nil {
		t.Fatal(err)
	}
	l2 := a.lease(t, time.Minute, false)
	il := a.lease(t, time.Minute, true)
	lb := b.lease(t, time.Minute, false)
	for _, c := range []struct {
		what string
		g    *Groups
		l    *kit.Lease
	}{
		{"the same lease", a.groups, l1},
		{"another lease of this sidecar", a.groups, l2},
		{"an implicit lease", a.groups, il},
		{"another sidecar", b.groups, lb},
	} {
		if _, err := c.g.Join(ctx, c.l, "g", "m", "theirs"); !errors.Is(err, ErrMemberExists) {
			t.Fatalf("join by %s: %v, want ErrMemberExists", c.what, err)
		}
		data, st2, err := conn.Get(gp + "/m")
		if err != nil || string(data) != "mine" || st2.Czxid != st.Czxid || st2.Mzxid != st.Mzxid {
			t.Fatalf("after the join by %s: %q %+v (%v), want the member untouched", c.what, data, st2, err)
		}
	}
	if h := l1.Holds(); len(h) != 1 {
		t.Fatalf("the member's lease holds %v after the refusals", h)
	}
	if !ended(il) || len(l2.Holds()) != 0 || len(lb.Holds()) != 0 {
		t.Fatalf("refused leases: implicit ended %v, others hold %v %v", ended(il), l2.Holds(), lb.Holds())
	}

	// A Curator GroupMember's node: a member like any other.
	if _, err := conn.Create(gp+"/cur", []byte("curator"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.groups.Join(ctx, l2, "g", "cur", "x"); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("join over a Curator member: %v, want ErrMemberExists", err)
	}
	if got := summary(a.inspect(t, "g")); got != "m=mine cur=curator" {
		t.Fatalf("members %q", got)
	}

	if err := a.groups.Leave(ctx, l1, "g", "m"); err != nil {
		t.Fatal(err)
	}
	b.join(t, lb, "g", "m", "theirs")
	a.join(t, l1, "g", "other", "")
	if got := summary(a.inspect(t, "g")); got != "cur=curator m=theirs other=" {
		t.Fatalf("members %q after m left and joined again elsewhere", got)
	}
}

// A member lives while its lease lives: revoked, the node is gone when Revoke
// returns; expired, when the lease is done; the sidecar's session ended, the
// lease ends as lost and ZooKeeper deletes the node.
func TestMemberEndsWithItsLease(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar()
	conn := w.client()
	gp := w.group("g")

	revoked := sc.lease(t, time.Minute, false)
	sc.join(t, revoked, "g", "revoked", "")
	if err := sc.leases.Revoke(revoked.ID); err != nil {
		t.Fatal(err)
	}
	if exists(t, conn, gp+"/revoked") {
		t.Fatal("member outlived its revoked lease")
	}

	// Pinned while it joins, the lease's TTL counts from the join's answer.
	expiring := sc.lease(t, 200*time.Millisecond, false)
	unpin := expiring.Pin()
	sc.join(t, expiring, "g", "expired", "")
	unpin()
	select {
	case <-expiring.Done():
	case <-time.After(testutil.Patience(10 * time.Second)):
		t.Fatal("lease not expired")
	}
	if !errors.Is(expiring.Err(), kit.ErrLeaseExpired) || exists(t, conn, gp+"/expired") {
		t.Fatalf("expired lease (%v): member still there %v", expiring.Err(), exists(t, conn, gp+"/expired"))
	}

	other := w.sidecar()
	lost := other.lease(t, time.Minute, false)
	other.join(t, lost, "g", "lost", "")
	other.s.Close()
	select {
	case <-lost.Done():
	case <-time.After(testutil.Patience(10 * time.Second)):
		t.Fatal("lease not ended with its session")
	}
	if !errors.Is(lost.Err(), kit.ErrSessionLost) {
		t.Fatalf("lease ended %v, want ErrSessionLost", lost.Err())
	}
	testutil.Eventually(t, 10*time.Second, "the closed session's member deleted", func() bool {
		return !exists(t, conn, gp+"/lost")
	})
	if v := sc.metric(t, "coord_group_members"); v != 0 {
		t.Fatalf("coord_group_members %v, want 0", v)
	}
}

// A member node deleted by another hand is a lost hold: the lease reports it
// and no longer holds the member (SetValue: ErrNotHeld), the id is free to join
// again, and an implicit lease ends.
func TestMemberDeletedByAnotherHandIsLost(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar()
	conn := w.client()
	ctx := context.Background()
	gp := w.group("g")

	l := sc.lease(t, time.Minute, false)
	il := sc.lease(t, time.Minute, true)
	sc.join(t, l, "g", "m", "v")
	sc.join(t, il, "g", "i", "v")
	for _, n := range []string{"m", "i"} {
		if err := conn.Delete(gp+"/"+n, -1); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the lease reports its member lost", func() bool {
		lost, _ := l.LostHolds(0)
		return len(lost) == 1 && lost[0].Hold == (kit.Hold{Kind: MemberKind, Name: "g/m"})
	})
	if h := l.Holds(); len(h) != 0 {
		t.Fatalf("holds %v after the loss", h)
	}
	if err := sc.groups.SetValue(ctx, l, "g", "m", "w"); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("SetValue of a lost member: %v, want ErrNotHeld", err)
	}
	select {
	case <-il.Done():
	case <-time.After(testutil.Patience(10 * time.Second)):
		t.Fatal("the implicit lease did not end with its lost member")
	}
	// The lost member's release frees its id just after the loss is reported.
	testutil.Eventually(t, 10*time.Second, "the lost id free to join again", func() bool {
		_, err := sc.groups.Join(ctx, l, "g", "m", "again")
		if err != nil && !errors.Is(err, ErrMemberExists) {
			t.Fatal(err)
		}
		return err == nil
	})
	sc.join(t, sc.lease(t, time.Minute, false), "g", "i", "again")
	if got := summary(sc.inspect(t, "g")); got != "m=again i=again" {
		t.Fatalf("members %q", got)
	}
}

// Invalid group and member names are refused before any ZooKeeper call: on a
// closed session, every call answers ErrInvalidName (a valid name gets as far
// as the session and fails there), and Follow starts no follower.
func TestInvalidNamesRefusedBeforeZooKeeper(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar()
	ctx := context.Background()
	l := sc.lease(t, time.Minute, false)
	sc.s.Close()

	bad := []string{"", ".", "..", "-a", "_c_0123-a", "a/b", "a b", "é", strings.Repeat("a", 129)}
	for _, n := range bad {
		calls := map[string]error{}
		_, calls["join, group"] = sc.groups.Join(ctx, l, n, "ok", "v")
		_, calls["join, member"] = sc.groups.Join(ctx, l, "ok", n, "v")
		calls["set value, group"] = sc.groups.SetValue(ctx, l, n, "ok", "v")
		calls["set value, member"] = sc.groups.SetValue(ctx, l, "ok", n, "v")
		calls["leave, group"] = sc.groups.Leave(ctx, l, n, "ok")
		calls["leave, member"] = sc.groups.Leave(ctx, l, "ok", n)
		_, calls["inspect"] = sc.groups.Inspect(ctx, n)
		_, calls["follow"] = sc.groups.Follow(n)
		_, calls["await"] = sc.groups.Await(ctx, n, 0, time.Minute)
		_, calls["adopt"] = sc.groups.Adopt(ctx, l, kit.SavedHold{Hold: kit.Hold{Kind: MemberKind, Name: "ok/" + n}, Nodes: []string{w.group("ok") + "/" + n}})
		for what, err := range calls {
			if !errors.Is(err, kit.ErrInvalidName) {
				t.Errorf("%s with %q: %v, want ErrInvalidName", what, n, err)
			}
		}
	}
	if n := sc.groups.followers.Len(); n != 0 {
		t.Fatalf("%d followers started for invalid names", n)
	}
	if _, err := sc.groups.Join(ctx, l, "ok", "ok", "v"); err == nil || errors.Is(err, kit.ErrInvalidName) {
		t.Fatalf("join with valid names on a closed session: %v, want a failure of the session", err)
	}
	if _, err := sc.groups.Inspect(ctx, "ok"); !errors.Is(err, kit.ErrClosed) {
		t.Fatalf("inspect with a valid name on a closed session: %v, want ErrClosed", err)
	}
}

// After a restart that resumed the session, the saved member is adopted as it
// is: the lease holds it again, another sidecar sees the same members, join
// order and version (no leave, no join), and the id is claimed here again; a
// saved hold that does not name the member's own node of this session is
// refused. The adopted member leaves as any other.
func TestAdoptKeepsTheMemberAcrossARestart(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar()
	other := w.sidecar()
	conn := w.client()
	ctx := context.Background()
	gp := w.group("g")

	// The predecessor's member, made under the session sc resumed, as Join
	// makes it; then another sidecar's.
	ep, err := sc.s.Current()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ep.CreateOwned(ctx, gp+"/m", []byte("v"), true); err != nil {
		t.Fatal(err)
	}
	other.join(t, other.lease(t, time.Minute, false), "g", "n", "w")
	before := other.inspect(t, "g")
	_, st, err := conn.Get(gp + "/m")
	if err != nil {
		t.Fatal(err)
	}

	saved := kit.SavedHold{Hold: kit.Hold{Kind: MemberKind, Name: "g/m"}, Nodes: []string{gp + "/m"}}
	l := restoreLease(t, sc, ep, saved)
	after := other.inspect(t, "g")
	_, st2, err := conn.Get(gp + "/m")
	if err != nil || summary(after) != "m=v n=w" || summary(after) != summary(before) || after.Version != before.Version ||
		st2.Czxid != st.Czxid || st2.Mzxid != st.Mzxid {
		t.Fatalf("another sidecar sees %q at %d (node %+v, %v); before: %q at %d (node %+v)",
			summary(after), after.Version, st2, err, summary(before), before.Version, st)
	}
	if v := sc.metric(t, "coord_group_members"); v != 1 {
		t.Fatalf("coord_group_members %v, want 1", v)
	}

	testAdoptRefusals(t, sc, l, saved)
	if got := summary(other.inspect(t, "g")); got != "m=v n=w" {
		t.Fatalf("members %q after the refused adoptions", got)
	}

	if err := sc.groups.Leave(ctx, l, "g", "m"); err != nil {
		t.Fatal(err)
	}
	if exists(t, conn, gp+"/m") || sc.metric(t, "coord_group_members") != 0 {
		t.Fatal("the adopted member did not leave")
	}
}

// restoreLease restores a saved lease holding saved on sc, as a successor
// does, and returns it: the member adopted, the lease holds it again.
func restoreLease(t *testing.T, sc *sidecar, ep *zookeeper.Epoch, saved kit.SavedHold) *kit.Lease {
	t.Helper()
	sl := kit.SavedLease{ID: kit.NewID(), TTL: time.Minute, ExpiresAt: time.Now().Add(time.Minute), Holds: []kit.SavedHold{saved}}
	sc.leases.RegisterAdoption(MemberKind, kit.Adoption{Adopt: sc.groups.Adopt})
	r, err := sc.leases.Restore(context.Background(), ep, []kit.SavedLease{sl})
	if err != nil || r.Leases != 1 || r.Holds != 1 || len(r.Lost) != 0 {
		t.Fatalf("restore: %+v %v", r, err)
	}
	l, err := sc.leases.Get(sl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Holds(); len(h) != 1 || h[0] != saved.Hold {
		t.Fatalf("restored lease holds %v", h)
	}
	return l
}

// testAdoptRefusals: the adopted member (saved, of lease l) is claimed here
// again (another lease's join and a second adoption answer ErrMemberExists),
// and a saved hold that does not name a member's own node of this session is
// not adopted.
func testAdoptRefusals(t *testing.T, sc *sidecar, l *kit.Lease, saved kit.SavedHold) {
	t.Helper()
	ctx := context.Background()
	if _, err := sc.groups.Join(ctx, sc.lease(t, time.Minute, false), "g", "m", "v"); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("join of the adopted id: %v, want ErrMemberExists", err)
	}
	if _, err := sc.groups.Adopt(ctx, l, saved); !errors.Is(err, ErrMemberExists) {
		t.Fatalf("second adoption: %v, want ErrMemberExists", err)
	}
	gp := path.Dir(saved.Nodes[0])
	for what, h := range map[string]kit.SavedHold{
		"another session's node": {Hold: kit.Hold{Kind: MemberKind, Name: "g/n"}, Nodes: []string{gp + "/n"}},
		"another node":           {Hold: kit.Hold{Kind: MemberKind, Name: "g/m"}, Nodes: []string{gp + "/n"}},
		"no node":                {Hold: kit.Hold{Kind: MemberKind, Name: "g/m"}},
		"a gone node":            {Hold: kit.Hold{Kind: MemberKind, Name: "g/gone"}, Nodes: []string{gp + "/gone"}},
	} {
		if _, err := sc.groups.Adopt(ctx, l, h); err == nil {
			t.Fatalf("adopted %s", what)
		}
	}
}
