// Package holdtest is the hold protocol's conformance suite: every recipe
// whose things a lease holds (kit.Acquire) runs Run from a test of its own
// package, against a real ZooKeeper, with a Subject that adapts its calls.
// The cases are the protocol's promises, whatever the recipe:
//
//   - acquire: the hold is on the lease, its nodes stand in ZooKeeper as
//     ephemeral nodes of the lease's session, another process's recipe sees
//     it held, and (unless the Subject says a second party may take it over)
//     another lease cannot take it and is left holding nothing;
//   - release: the lease lets it go, its nodes are gone when Release returns,
//     and another process takes it;
//   - lease end: a revoked lease and a lease whose TTL ran out release it;
//   - lost hold: a node deleted by another hand ends the hold as lost on a
//     lease that lives on;
//   - lost session: a session ZooKeeper expired reports the hold lost and
//     ends the lease (kit.ErrSessionLost); nothing of it is carried over to
//     the process's next session, and another process takes the name;
//   - adopt after a restart: a successor process resumes the session
//     (zookeeper.Config.Resume), restores the saved leases
//     (kit.Leases.Restore with the recipe's kit.Adoption) and holds the same
//     nodes (every node of the session as it was); in between, and after,
//     nobody else can take the name; the adopted hold is released as any
//     other, and lost as any other when another hand deletes its node.
//
// Every wait is generous; nothing asserts a duration.
package holdtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/transport"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Subject is a holding recipe as the suite sees it.
type Subject struct {
	// Open makes the recipe on s as one sidecar process does: the suite
	// opens it for every process of a case, and again for a successor.
	Open func(t testing.TB, s *zookeeper.Session) Recipe
	// TakenOver says that a second lease may take a held name (a raised
	// barrier is taken over by whoever raises it): the suite then does not
	// expect a second party to be refused while it is held.
	TakenOver bool
	// ReleaseIsLoss says that the recipe's release is no release of the
	// lease's: the thing is deleted however it was made (a barrier lowered,
	// a key deleted), and the lease reports its hold lost, as for any other
	// hand's delete. The release case then expects the loss.
	ReleaseIsLoss bool
}

// Recipe is one process's recipe, its calls reduced to what the suite needs.
// name is a name the suite chooses, valid for every recipe (a lock's name, a
// group member's id in a group of the Subject's choosing, a queue's name).
type Recipe struct {
	// Kind is the recipe's hold kind and Resume what it registers for a
	// restart (kit.Leases.RegisterKind).
	Kind   string
	Resume kit.Adoption
	// Prepare, if set, is called once per case on the first process before
	// anything is acquired (a queue's item to claim).
	Prepare func(ctx context.Context, name string) error
	// Acquire takes name for lease without waiting behind another holder,
	// and returns the hold it put on the lease.
	Acquire func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error)
	// Contend, if set, is a second party's acquire of what Acquire took,
	// when it is not Acquire's (a writer against a read lock).
	Contend func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error)
	// Refused, if set, is the error (errors.Is) a second party's acquire
	// gets while the name is held.
	Refused error
	// Release lets the lease's hold h go with the recipe's own release call.
	Release func(ctx context.Context, lease *kit.Lease, h kit.Hold) error
	// Held reads, as the recipe does for its clients, whether name is held.
	Held func(ctx context.Context, name string) (bool, error)
	// Nodes, if set, lists every node hold h keeps in ZooKeeper: held, the
	// nodes the lease watches (kit.NodeHolding), and those besides (a queue
	// claim's claims/ entry, a key's type node), which must stand and go
	// with them. Without it, the held ones.
	Nodes func(h kit.Hold, held []string) []string
}

func (r Recipe) contend(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
	if r.Contend != nil {
		return r.Contend(ctx, lease, name)
	}
	return r.Acquire(ctx, lease, name)
}

// Run runs every case of the suite on subject, each as a subtest with its
// own root, processes and ZooKeeper sessions (on zktest.Shared's servers:
// the package's TestMain must run zktest.Main).
func Run(t *testing.T, subject Subject) {
	t.Run("Acquire", func(t *testing.T) { testAcquire(t, subject) })
	t.Run("Release", func(t *testing.T) { testRelease(t, subject) })
	t.Run("LeaseRevoked", func(t *testing.T) { testLeaseEnd(t, subject, false) })
	t.Run("LeaseExpired", func(t *testing.T) { testLeaseEnd(t, subject, true) })
	t.Run("NodeDeleted", func(t *testing.T) { testNodeDeleted(t, subject) })
	t.Run("SessionLost", func(t *testing.T) { testSessionLost(t, subject) })
	t.Run("AdoptAfterRestart", func(t *testing.T) { testAdopt(t, subject) })
	t.Run("AdoptedHoldLost", func(t *testing.T) { testAdoptedLost(t, subject) })
}

// bound is what every wait of the suite gives a condition (made patient by
// testutil.Eventually), and patience the same bound for the suite's own waits.
const bound = time.Minute

var patience = testutil.Patience(bound)

// world is one case's ZooKeeper: its servers, root and an observer session
// that reads nodes from outside every process.
type world struct {
	zkc      *zktest.Cluster
	root     string
	observer *zookeeper.Session
	subject  Subject
}

func newWorld(t *testing.T, subject Subject) *world {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	return &world{zkc: zkc, root: root, subject: subject, observer: zookeepertest.NewSession(t, zkc.Servers(), root)}
}

// process is one sidecar process: a session, its leases and the recipe.
type process struct {
	s      *zookeeper.Session
	leases *kit.Leases
	recipe Recipe
	proxy  *faultproxy.Proxy // when started behind one
}

// start starts a process on cfg's session (Servers and Root filled in when
// empty), the recipe's kind registered for restarts.
func (w *world) start(t *testing.T, cfg zookeeper.Config) *process {
	t.Helper()
	if cfg.Servers == nil {
		cfg.Servers = w.zkc.Servers()
	}
	cfg.Root = w.root
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	s := zookeepertest.Start(t, cfg)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := ep.EnsurePersistent(ctx, w.root); err != nil {
		t.Fatal(err)
	}
	leases := kit.NewLeases(s, nil)
	// Opened first, so that the recipe's own cleanup runs after the
	// session's end (cleanups run last in, first out).
	p := &process{s: s, leases: leases, recipe: w.subject.Open(t, s)}
	t.Cleanup(func() { leases.Close(); s.Close(); leases.Wait() })
	leases.RegisterAdoption(p.recipe.Kind, p.recipe.Resume)
	return p
}

// startProxied starts a process whose session goes through a fault proxy to
// the first server, with a session timeout of timeout.
func (w *world) startProxied(t *testing.T, timeout time.Duration) *process {
	t.Helper()
	proxy := faultproxy.Start(t, w.zkc.Server(0))
	p := w.start(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Timeout: timeout})
	p.proxy = proxy
	return p
}

func (p *process) lease(t *testing.T, ttl time.Duration) *kit.Lease {
	t.Helper()
	l, err := p.leases.Grant(ttl, false)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func caseCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*patience)
	t.Cleanup(cancel)
	return ctx
}

// name is the one name each case works on.
const name = "conformance"

// acquire takes name on p for l and checks the protocol's part of the
// answer: the lease holds h, and h names its nodes (kit.NodeHolding). It
// returns h and every node it keeps (Recipe.Nodes).
func (w *world) acquire(t *testing.T, ctx context.Context, p *process, l *kit.Lease) (kit.Hold, []string) {
	t.Helper()
	h, err := p.recipe.Acquire(ctx, l, name)
	if err != nil {
		t.Fatalf("acquire %q: %v", name, err)
	}
	if h.Kind != p.recipe.Kind {
		t.Fatalf("acquired hold %+v, want kind %q", h, p.recipe.Kind)
	}
	if !slices.Contains(l.Holds(), h) {
		t.Fatalf("lease holds %v after the acquire, want %+v among them", l.Holds(), h)
	}
	saved, ok := p.leases.SavedHoldOf(l.ID, h)
	if !ok || len(saved.Nodes) == 0 {
		t.Fatalf("hold %+v names no nodes (%+v, %v): a successor could not adopt it", h, saved, ok)
	}
	if p.recipe.Nodes != nil {
		return h, p.recipe.Nodes(h, saved.Nodes)
	}
	return h, saved.Nodes
}

// stat reads node p from outside; nil when it does not exist.
func (w *world) stat(t *testing.T, ctx context.Context, p string) *zookeeper.Stat {
	t.Helper()
	ep, err := w.observer.WaitCurrent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ok, st, err := ep.Exists(ctx, p)
	if err != nil {
		t.Fatalf("exists %s: %v", p, err)
	}
	if !ok {
		return nil
	}
	return st
}

// checkOwned fails t unless every node stands as an ephemeral node of
// session id; it returns their stats.
func (w *world) checkOwned(t *testing.T, ctx context.Context, nodes []string, id int64) []*zookeeper.Stat {
	t.Helper()
	var out []*zookeeper.Stat
	for _, p := range nodes {
		st := w.stat(t, ctx, p)
		if st == nil {
			t.Fatalf("held node %s does not exist", p)
		}
		if st.EphemeralOwner != id {
			t.Fatalf("held node %s is owned by session 0x%x, want the holder's 0x%x", p, st.EphemeralOwner, id)
		}
		out = append(out, st)
	}
	return out
}

// checkGone fails t when one of nodes still exists.
func (w *world) checkGone(t *testing.T, ctx context.Context, nodes []string, after string) {
	t.Helper()
	for _, p := range nodes {
		if st := w.stat(t, ctx, p); st != nil {
			t.Fatalf("%s: node %s still exists (owner 0x%x)", after, p, st.EphemeralOwner)
		}
	}
}

// awaitGone waits until every one of nodes is gone.
func (w *world) awaitGone(t *testing.T, ctx context.Context, nodes []string, what string) {
	t.Helper()
	left := ""
	defer func() {
		if t.Failed() && left != "" {
			t.Log("still there:", left)
		}
	}()
	testutil.Eventually(t, bound, what, func() bool {
		for _, p := range nodes {
			if st := w.stat(t, ctx, p); st != nil {
				left = fmt.Sprintf("%s (owner 0x%x, czxid %d)", p, st.EphemeralOwner, st.Czxid)
				return false
			}
		}
		return true
	})
}

// owned lists the nodes under the case's root that are ephemeral nodes of
// session id.
func (w *world) owned(t *testing.T, ctx context.Context, id int64) []string {
	t.Helper()
	m := w.ownedCzxids(t, ctx, id)
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// ownedCzxids maps each node under the case's root that is an ephemeral
// node of session id to its czxid.
func (w *world) ownedCzxids(t *testing.T, ctx context.Context, id int64) map[string]int64 {
	t.Helper()
	ep, err := w.observer.WaitCurrent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	var walk func(p string)
	walk = func(p string) {
		ok, st, err := ep.Exists(ctx, p)
		if err != nil {
			t.Fatalf("exists %s: %v", p, err)
		}
		if !ok {
			return
		}
		if st.EphemeralOwner == id {
			out[p] = st.Czxid
		}
		children, _, err := ep.Children(ctx, p)
		if errors.Is(err, zookeeper.ErrNoNode) {
			return
		}
		if err != nil {
			t.Fatalf("children %s: %v", p, err)
		}
		for _, c := range children {
			walk(p + "/" + c)
		}
	}
	walk(w.root)
	return out
}

// awaitNothingOwned waits until session id owns no node under the root: a
// hold that ended leaves nothing of its holder behind (a line's node, a
// partition's owner node, an index entry), whatever Nodes names.
func (w *world) awaitNothingOwned(t *testing.T, ctx context.Context, id int64, after string) {
	t.Helper()
	var left []string
	defer func() {
		if t.Failed() && len(left) > 0 {
			t.Log("still owned:", left)
		}
	}()
	testutil.Eventually(t, bound, after+": the holder's session owns no node", func() bool {
		left = w.owned(t, ctx, id)
		return len(left) == 0
	})
}

// awaitHeld waits until p's recipe reads name as held (want) or free.
func awaitHeld(t *testing.T, ctx context.Context, p *process, want bool) {
	t.Helper()
	what := "another process reads the name as free"
	if want {
		what = "another process reads the name as held"
	}
	var last error
	testutil.Eventually(t, bound, what, func() bool {
		held, err := p.recipe.Held(ctx, name)
		last = err
		return err == nil && held == want
	})
	if last != nil {
		t.Fatal(last)
	}
}

// checkRefused has p try to take name for a lease of its own while another
// holds it: refused (unless the subject lets a second party take it over),
// and the contender's lease is left holding nothing.
func (w *world) checkRefused(t *testing.T, ctx context.Context, p *process, why string) {
	t.Helper()
	if w.subject.TakenOver {
		return
	}
	l := p.lease(t, time.Minute)
	h, err := p.recipe.contend(ctx, l, name)
	if err == nil {
		t.Fatalf("%s: another lease took %q (%+v)", why, name, h)
	}
	if p.recipe.Refused != nil && !errors.Is(err, p.recipe.Refused) {
		t.Fatalf("%s: another lease's acquire answered %v, want %v", why, err, p.recipe.Refused)
	}
	if held := l.Holds(); len(held) != 0 {
		t.Fatalf("%s: the refused contender's lease holds %v (its acquire: %v)", why, held, err)
	}
	if err := p.leases.Revoke(l.ID); err != nil {
		t.Fatal(err)
	}
}

// checkTakes has p take name for a lease of its own (the name is free): its
// nodes are p's session's. It returns the lease.
func (w *world) checkTakes(t *testing.T, ctx context.Context, p *process, why string) *kit.Lease {
	t.Helper()
	l := p.lease(t, time.Minute)
	h, err := p.recipe.contend(ctx, l, name)
	if err != nil {
		t.Fatalf("%s: another process cannot take %q: %v", why, name, err)
	}
	saved, ok := p.leases.SavedHoldOf(l.ID, h)
	if !ok {
		t.Fatalf("%s: the taker's lease does not hold %+v", why, h)
	}
	ep, err := p.s.Current()
	if err != nil {
		t.Fatal(err)
	}
	w.checkOwned(t, ctx, saved.Nodes, ep.ID())
	return l
}

func (w *world) prepare(t *testing.T, ctx context.Context, p *process) {
	t.Helper()
	if p.recipe.Prepare != nil {
		if err := p.recipe.Prepare(ctx, name); err != nil {
			t.Fatalf("prepare: %v", err)
		}
	}
}

// startPair starts a case: its world, its context, and two processes on
// sessions of their own, a (prepared for the subject) to hold and b to
// contend.
func startPair(t *testing.T, subject Subject) (*world, context.Context, *process, *process) {
	w := newWorld(t, subject)
	ctx := caseCtx(t)
	a, b := w.start(t, zookeeper.Config{}), w.start(t, zookeeper.Config{})
	w.prepare(t, ctx, a)
	return w, ctx, a, b
}

// checkFreed checks what every case checks once a hold is let go, after
// (said in its failures): the session of owner, the process that held it,
// comes to own no node, and b sees the name free and takes it.
func (w *world) checkFreed(t *testing.T, ctx context.Context, owner, b *process, after string) {
	t.Helper()
	w.awaitNothingOwned(t, ctx, sessionID(t, owner), after)
	awaitHeld(t, ctx, b, false)
	w.checkTakes(t, ctx, b, after)
}

// sessionID is p's current ZooKeeper session.
func sessionID(t *testing.T, p *process) int64 {
	t.Helper()
	ep, err := p.s.Current()
	if err != nil {
		t.Fatal(err)
	}
	return ep.ID()
}

func testAcquire(t *testing.T, subject Subject) {
	w, ctx, a, b := startPair(t, subject)
	l := a.lease(t, time.Minute)
	_, nodes := w.acquire(t, ctx, a, l)
	w.checkOwned(t, ctx, nodes, sessionID(t, a))
	awaitHeld(t, ctx, b, true)
	w.checkRefused(t, ctx, b, "while held")
}

func testRelease(t *testing.T, subject Subject) {
	w, ctx, a, b := startPair(t, subject)
	l := a.lease(t, time.Minute)
	h, nodes := w.acquire(t, ctx, a, l)
	awaitHeld(t, ctx, b, true)
	if err := a.recipe.Release(ctx, l, h); err != nil {
		t.Fatalf("release: %v", err)
	}
	if subject.ReleaseIsLoss {
		awaitLost(t, l, h)
		w.awaitGone(t, ctx, nodes, "the released hold's other nodes deleted")
	} else if slices.Contains(l.Holds(), h) {
		t.Fatalf("the lease still holds %+v after its release", h)
	} else if lost, _ := l.LostHolds(0); len(lost) != 0 {
		t.Fatalf("the release was reported as a loss: %+v", lost)
	}
	if l.Err() != nil {
		t.Fatalf("the explicit lease ended with its hold's release: %v", l.Err())
	}
	w.checkGone(t, ctx, nodes, "after the release returned")
	w.checkFreed(t, ctx, a, b, "after the release")
}

// testLeaseEnd: a revoked lease (expired: a lease never kept alive) releases
// what it held.
func testLeaseEnd(t *testing.T, subject Subject, expire bool) {
	w, ctx, a, b := startPair(t, subject)
	ttl, want := time.Minute, kit.ErrLeaseRevoked
	if expire {
		ttl, want = 2*time.Second, kit.ErrLeaseExpired
	}
	l := a.lease(t, ttl)
	// Pinned while it acquires (however long that takes on a busy machine),
	// the lease's TTL counts from the unpin.
	unpin := l.Pin()
	_, nodes := w.acquire(t, ctx, a, l)
	unpin()
	if expire {
		select {
		case <-l.Done():
		case <-time.After(patience):
			t.Fatalf("the lease of TTL %s, never kept alive, has not ended", ttl)
		}
	} else if err := a.leases.Revoke(l.ID); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(l.Err(), want) {
		t.Fatalf("lease ended with %v, want %v", l.Err(), want)
	}
	if held := l.Holds(); len(held) != 0 {
		t.Fatalf("the ended lease lists %v", held)
	}
	w.checkGone(t, ctx, nodes, "after the lease ended")
	w.checkFreed(t, ctx, a, b, "after the lease ended")
}

// testNodeDeleted: a held node deleted by another hand ends the hold as lost;
// the lease lives on, and the name is free for others.
func testNodeDeleted(t *testing.T, subject Subject) {
	w, ctx, a, b := startPair(t, subject)
	l := a.lease(t, time.Minute)
	h, nodes := w.acquire(t, ctx, a, l)
	saved, _ := a.leases.SavedHoldOf(l.ID, h)
	w.deleteFromOutside(t, ctx, saved.Nodes)
	awaitLost(t, l, h)
	if l.Err() != nil {
		t.Fatalf("the lease ended with its lost hold: %v", l.Err())
	}
	w.awaitGone(t, ctx, nodes, "the lost hold's other nodes deleted")
	w.checkFreed(t, ctx, a, b, "after the hold was lost")
}

// deleteFromOutside deletes nodes through the observer's session: another
// hand than the holder's.
func (w *world) deleteFromOutside(t *testing.T, ctx context.Context, nodes []string) {
	t.Helper()
	ep, err := w.observer.WaitCurrent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range nodes {
		if err := ep.Delete(ctx, p, -1); err != nil {
			t.Fatalf("delete %s from outside: %v", p, err)
		}
	}
}

// awaitLost waits until lease l reports h lost and no longer holds it.
func awaitLost(t *testing.T, l *kit.Lease, h kit.Hold) {
	t.Helper()
	testutil.Eventually(t, bound, fmt.Sprintf("the lease reports %+v lost", h), func() bool {
		lost, _ := l.LostHolds(0)
		return slices.ContainsFunc(lost, func(x kit.LostHold) bool { return x.Hold == h })
	})
	if slices.Contains(l.Holds(), h) {
		t.Fatalf("the lease reports %+v lost and still holds it", h)
	}
}

// testSessionLost: ZooKeeper expires the holder's session behind a cut
// connection. The hold is reported lost and the lease ends as lost; the
// process's next session holds nothing of it (its recipe does not think it
// holds the name: a new lease of it is refused while another holds it, and
// takes it once free); another process takes the name.
func testSessionLost(t *testing.T, subject Subject) {
	w := newWorld(t, subject)
	ctx := caseCtx(t)
	a, b := w.startProxied(t, 4*time.Second), w.start(t, zookeeper.Config{})
	w.prepare(t, ctx, a)
	l := a.lease(t, time.Minute)
	h, nodes := w.acquire(t, ctx, a, l)
	lostEp := zookeepertest.Expire(t, a.s, w.zkc.Servers(), a.proxy.Cut, a.proxy.Restore)
	select {
	case <-l.Done():
	case <-time.After(patience):
		t.Fatal("the lease of the expired session has not ended")
	}
	if !errors.Is(l.Err(), kit.ErrSessionLost) {
		t.Fatalf("lease ended with %v, want kit.ErrSessionLost", l.Err())
	}
	if lost, _ := l.LostHolds(0); !slices.ContainsFunc(lost, func(x kit.LostHold) bool { return x.Hold == h }) {
		t.Fatalf("lost holds %+v: %+v never reported lost", lost, h)
	}
	if held := l.Holds(); len(held) != 0 {
		t.Fatalf("the lost lease lists %v", held)
	}
	w.checkGone(t, ctx, nodes, "after the session expired")
	awaitHeld(t, ctx, b, false)
	bl := w.checkTakes(t, ctx, b, "after the holder's session expired")

	// The holder's process goes on under a new session, holding nothing.
	testutil.Eventually(t, bound, "a new session", func() bool {
		ep, err := a.s.Current()
		return err == nil && ep != lostEp
	})
	w.checkRefused(t, ctx, a, "the expired holder's process, on its new session, while another holds the name")
	if err := b.leases.Revoke(bl.ID); err != nil {
		t.Fatal(err)
	}
	awaitHeld(t, ctx, a, false)
	w.checkTakes(t, ctx, a, "the expired holder's process, on its new session, once the name is free")
}

// testAdopt: the holder's process hands its session over (Detach) to a
// successor that resumes it and restores its leases from their snapshot,
// as the state directory saves it. The hold's nodes stand throughout (same
// czxid, same owner), nobody takes the name meanwhile, the successor's lease
// holds it, and its release frees it.
func testAdopt(t *testing.T, subject Subject) {
	w, ctx, a, b := startPair(t, subject)
	l := a.lease(t, time.Minute)
	h, nodes := w.acquire(t, ctx, a, l)
	succ, sl := w.restart(t, ctx, a, b, l, h, nodes)

	if err := succ.recipe.Release(ctx, sl, h); err != nil {
		t.Fatalf("the successor's release of the adopted hold: %v", err)
	}
	w.checkGone(t, ctx, nodes, "after the successor released the adopted hold")
	w.checkFreed(t, ctx, succ, b, "after the successor released the adopted hold")
}

// testAdoptedLost: an adopted hold is watched as a new one is: its node
// deleted by another hand, the restored lease reports it lost, lives on,
// and the name is free for others.
func testAdoptedLost(t *testing.T, subject Subject) {
	w, ctx, a, b := startPair(t, subject)
	l := a.lease(t, time.Minute)
	h, nodes := w.acquire(t, ctx, a, l)
	saved, _ := a.leases.SavedHoldOf(l.ID, h)
	succ, sl := w.restart(t, ctx, a, b, l, h, nodes)

	w.deleteFromOutside(t, ctx, saved.Nodes)
	awaitLost(t, sl, h)
	if sl.Err() != nil {
		t.Fatalf("the restored lease ended with its lost hold: %v", sl.Err())
	}
	w.awaitGone(t, ctx, nodes, "the lost adopted hold's other nodes deleted")
	w.checkFreed(t, ctx, succ, b, "after the adopted hold was lost")
}

// restart hands a's session over to a successor process that resumes it and
// restores a's leases from their snapshot, and checks that lease l's hold h
// (keeping nodes) stood throughout, with b refused the name (unless taken
// over) before the successor came and after. It returns the successor and
// its lease l.
func (w *world) restart(t *testing.T, ctx context.Context, a, b *process, l *kit.Lease, h kit.Hold, nodes []string) (*process, *kit.Lease) {
	t.Helper()
	ep, err := a.s.Current()
	if err != nil {
		t.Fatal(err)
	}
	before := w.checkOwned(t, ctx, nodes, ep.ID())
	all := w.ownedCzxids(t, ctx, ep.ID())
	resumable, ok := ep.Resumable()
	if !ok {
		t.Fatal("no resumable session")
	}
	saved := a.leases.Snapshot()
	a.s.Detach()

	// No process serves the session: it holds on, and nobody takes the name.
	w.checkOwned(t, ctx, nodes, resumable.ID)
	w.checkRefused(t, ctx, b, "between the predecessor's end and the successor's resume")

	succ, sep := w.resume(t, ctx, resumable)
	restored, err := succ.leases.Restore(ctx, sep, saved)
	if err != nil || restored.Leases != 1 || restored.Holds != 1 || len(restored.Lost) != 0 || restored.Swept != 0 {
		t.Fatalf("restore: %+v, %v; want one lease and its hold adopted, nothing lost or swept", restored, err)
	}
	sl, err := succ.leases.Get(l.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sl.Holds(), h) {
		t.Fatalf("the restored lease holds %v, want %+v", sl.Holds(), h)
	}
	after := w.checkOwned(t, ctx, nodes, resumable.ID)
	for i := range nodes {
		if after[i].Czxid != before[i].Czxid {
			t.Fatalf("node %s made again (czxid %d, was %d): the hold had a gap", nodes[i], after[i].Czxid, before[i].Czxid)
		}
	}
	if now := w.ownedCzxids(t, ctx, resumable.ID); !maps.Equal(now, all) {
		t.Fatalf("the session's nodes (path: czxid) before the restart %v, after the restore %v: the restore dropped or made some", all, now)
	}
	awaitHeld(t, ctx, b, true)
	w.checkRefused(t, ctx, b, "after the successor adopted the hold")
	return succ, sl
}

// resume starts a successor process that resumes session r, as a restart
// does, and returns it with the resumed session once it is current and
// synced.
func (w *world) resume(t *testing.T, ctx context.Context, r transport.Resumable) (*process, *zookeeper.Epoch) {
	t.Helper()
	succ := w.start(t, zookeeper.Config{Resume: &r})
	if err := succ.s.WaitResume(ctx); err != nil {
		t.Fatalf("the successor did not resume the session: %v", err)
	}
	ep, err := succ.s.WaitCurrent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ep.ID() != r.ID {
		t.Fatalf("successor's session 0x%x, want the predecessor's 0x%x", ep.ID(), r.ID)
	}
	if err := ep.Sync(ctx, w.root); err != nil {
		t.Fatal(err)
	}
	return succ, ep
}
