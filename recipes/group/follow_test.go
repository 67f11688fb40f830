package group

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// states records what a follower publishes (Subscribe), in order.
type states struct {
	mu   sync.Mutex
	seen []*State
}

func (r *states) add(st *State) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, st)
}

func (r *states) all() []*State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// await waits until the last state published is accepted by cond, and returns it.
func (r *states) await(t *testing.T, what string, cond func(*State) bool) *State {
	t.Helper()
	var last *State
	testutil.Eventually(t, 10*time.Second, what, func() bool {
		all := r.all()
		if len(all) == 0 {
			return false
		}
		last = all[len(all)-1]
		return cond(last)
	})
	return last
}

// published lists the members (summary) of each connected state published,
// in order, failing t unless every one shows something new with a higher
// version. A reconnect, should a busy machine cause one, publishes the last
// state Suspended and then again: those two are left out.
func (r *states) published(t *testing.T) []string {
	t.Helper()
	var out []string
	var prev *State
	for _, st := range r.all() {
		if st.Suspended {
			continue
		}
		again := prev != nil && st.Version == prev.Version && summary(st) == summary(prev)
		if prev != nil && st.Version <= prev.Version && !again {
			t.Fatalf("version went from %d (%q) to %d (%q)", prev.Version, summary(prev), st.Version, summary(st))
		}
		if prev == nil || summary(st) != summary(prev) {
			out = append(out, summary(st))
		}
		prev = st
	}
	return out
}

// awaitMembers waits until the last state published is connected with members
// want (summary).
func (r *states) awaitMembers(t *testing.T, want, what string) *State {
	t.Helper()
	return r.await(t, what, func(st *State) bool { return !st.Suspended && summary(st) == want })
}

// The live view: the first state published is the group as it is (its members
// read already), then each change: a member joining on another sidecar, its
// change of value, a Curator member (and never a protected-create leftover),
// leaves. Every state published shows something new with a higher version, and
// the last one is ZooKeeper's. However many handles follow the group, the
// sidecar runs one follower, stopped by the last Close.
func TestFollowSnapshotThenEachChange(t *testing.T) {
	w := newWorld(t)
	a := w.sidecar()
	b := w.sidecar()
	conn := w.client()
	ctx := context.Background()
	gp := w.group("workers")

	a.join(t, a.lease(t, time.Minute, false), "workers", "w1", "x")
	f, err := a.groups.Follow("workers")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f2, err := a.groups.Follow("workers")
	if err != nil {
		t.Fatal(err)
	}
	if v := a.metric(t, "coord_groups_watched"); v != 1 {
		t.Fatalf("coord_groups_watched %v with two handles on one group, want 1", v)
	}
	seen := &states{}
	defer f.Subscribe(seen.add)()

	seen.awaitMembers(t, "w1=x", "the snapshot")
	lb := b.lease(t, time.Minute, false)
	b.join(t, lb, "workers", "w2", "y")
	seen.awaitMembers(t, "w1=x w2=y", "a member joined on another sidecar")
	if err := b.groups.SetValue(ctx, lb, "workers", "w2", "z"); err != nil {
		t.Fatal(err)
	}
	seen.awaitMembers(t, "w1=x w2=z", "its value changed")
	leftover := gp + "/" + zookeeper.ProtectedPrefix(zookeeper.NewGUID()) + "member"
	for _, p := range []string{leftover, gp + "/cur"} {
		if _, err := conn.Create(p, []byte("c"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	seen.awaitMembers(t, "w1=x w2=z cur=c", "a Curator member, and no protected-create leftover")
	if err := b.groups.Leave(ctx, lb, "workers", "w2"); err != nil {
		t.Fatal(err)
	}
	seen.awaitMembers(t, "w1=x cur=c", "a member left")
	if err := conn.Delete(gp+"/cur", -1); err != nil {
		t.Fatal(err)
	}
	last := seen.awaitMembers(t, "w1=x", "the Curator member left")
	if last.Version != zkVersion(t, conn, gp) {
		t.Fatalf("last version %d, ZooKeeper's %d", last.Version, zkVersion(t, conn, gp))
	}

	// A state at each change (the leftover's creation is one: it moves the
	// version), never one that shows nothing new.
	want := []string{"w1=x", "w1=x w2=y", "w1=x w2=z", "w1=x w2=z cur=c", "w1=x cur=c", "w1=x"}
	if got := seen.published(t); !slices.Equal(got, want) {
		t.Fatalf("published %q, want %q", got, want)
	}

	f2.Close()
	if v := a.metric(t, "coord_groups_watched"); v != 1 {
		t.Fatalf("coord_groups_watched %v with one handle left, want 1", v)
	}
	f.Close()
	if v := a.metric(t, "coord_groups_watched"); v != 0 || a.groups.followers.Len() != 0 {
		t.Fatalf("coord_groups_watched %v after the last Close, want 0", v)
	}
}

// A group without a node is followed as empty at version 0; the first join
// makes it and is seen (the follower watched for the node to appear).
func TestFollowAGroupWithoutANode(t *testing.T) {
	w := newWorld(t)
	a := w.sidecar()
	b := w.sidecar()

	f, err := a.groups.Follow("later")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := &states{}
	defer f.Subscribe(seen.add)()
	first := seen.await(t, "the first state", func(*State) bool { return true })
	if first.Suspended || first.Version != 0 || first.Members == nil || len(first.Members) != 0 || first.Group != "later" {
		t.Fatalf("first state %+v, want group later empty at version 0", first)
	}
	b.join(t, b.lease(t, time.Minute, false), "later", "m", "v")
	seen.awaitMembers(t, "m=v", "the first member, joined on another sidecar")
}

// While the sidecar's session is suspended, the view is the last state seen
// (same members, same version) marked Suspended, a group first followed then
// is empty and Suspended, and a long-poll answers no stale state (at the end
// of its wait it reads ZooKeeper, and cannot). Once the session is back, the
// view shows what changed meanwhile.
func TestFollowWhileSuspended(t *testing.T) {
	w := newWorld(t)
	proxy := faultproxy.Start(t, w.zkc.Server(0))
	// A session timeout far longer than the cut: the session survives it.
	a := startSidecar(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Root: w.root, Timeout: 10 * time.Second})
	b := w.sidecar()
	ctx := context.Background()

	lb := b.lease(t, time.Minute, false)
	b.join(t, lb, "workers", "w1", "v")
	f, err := a.groups.Follow("workers")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	seen := &states{}
	defer f.Subscribe(seen.add)()
	before := seen.awaitMembers(t, "w1=v", "the snapshot")

	proxy.Cut()
	suspended := seen.await(t, "the view suspended", func(st *State) bool { return st.Suspended })
	if summary(suspended) != "w1=v" || suspended.Version != before.Version || suspended.Group != "workers" {
		t.Fatalf("suspended state %+v, want the last one (%+v) marked", suspended, before)
	}
	b.join(t, lb, "workers", "w2", "v")

	g, err := a.groups.Follow("other")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	first, ok := g.Await(ctx, testutil.Patience(10*time.Second), func(*State) bool { return true })
	if !ok || !first.Suspended || len(first.Members) != 0 || first.Version != 0 {
		t.Fatalf("a group first followed while suspended: %+v (%v), want empty and Suspended", first, ok)
	}
	if st, err := a.groups.Await(ctx, "workers", before.Version, 50*time.Millisecond); !errors.Is(err, kit.ErrUnavailable) {
		t.Fatalf("long-poll while suspended: %+v %v, want ErrUnavailable", st, err)
	}
	if a.s.State() == zookeeper.StateConnected {
		t.Fatal("the session reconnected through the cut")
	}

	proxy.Restore()
	back := seen.awaitMembers(t, "w1=v w2=v", "the view back, with the join made meanwhile")
	if back.Version <= before.Version {
		t.Fatalf("version %d after the reconnect, was %d", back.Version, before.Version)
	}
}

// Await answers at once for a version other than the group's; for the group's
// version, at the next change (made on another sidecar); when nothing changes,
// at the end of its wait with the group as ZooKeeper has it; when ctx ends
// first, with ctx's cause.
func TestAwait(t *testing.T) {
	w := newWorld(t)
	a := w.sidecar()
	b := w.sidecar()
	ctx := context.Background()

	a.join(t, a.lease(t, time.Minute, false), "g", "m1", "v")
	now := a.inspect(t, "g")
	if st, err := a.groups.Await(ctx, "g", 0, time.Minute); err != nil || st.Version != now.Version || summary(st) != "m1=v" {
		t.Fatalf("await of another version: %+v %v, want the group at %d", st, err, now.Version)
	}

	type answer struct {
		st  *State
		err error
	}
	done := make(chan answer, 1)
	go func() {
		// Its own wait bounds it: on a timeout it answers the unchanged group.
		st, err := a.groups.Await(ctx, "g", now.Version, testutil.Patience(10*time.Second))
		done <- answer{st, err}
	}()
	b.join(t, b.lease(t, time.Minute, false), "g", "m2", "w")
	ans := <-done
	if ans.err != nil || summary(ans.st) != "m1=v m2=w" || ans.st.Version <= now.Version || ans.st.Suspended {
		t.Fatalf("await of the current version: %+v %v, want the join", ans.st, ans.err)
	}

	st, err := a.groups.Await(ctx, "g", ans.st.Version, 50*time.Millisecond)
	if err != nil || st.Version != ans.st.Version || summary(st) != "m1=v m2=w" {
		t.Fatalf("await with no change: %+v %v, want the group as it is", st, err)
	}

	stop := errors.New("the client went away")
	cctx, cancel := context.WithCancelCause(ctx)
	cancel(stop)
	if st, err := a.groups.Await(cctx, "g", ans.st.Version, time.Minute); !errors.Is(err, stop) {
		t.Fatalf("await after ctx ended: %+v %v, want its cause", st, err)
	}
}
