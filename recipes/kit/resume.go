package kit

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Restarts (issue 23): a successor process that resumed its predecessor's
// ZooKeeper session re-creates the predecessor's leases from what was saved
// (Snapshot, written by the state directory) and adopts each hold from its
// nodes, which the resumed session still owns. See the package doc of
// internal/sidecar, "Restarts".

// SavedLease is a lease as a successor needs it.
type SavedLease struct {
	ID       string
	TTL      time.Duration
	Owner    string
	Implicit bool
	// ExpiresAt is when the lease ends unless kept alive; for a pinned lease
	// (an open keepalive stream, a waiting request) now + TTL, so that its
	// client has the TTL to come back to the successor.
	ExpiresAt time.Time
	// Pinned: the lease was pinned, its expiry moving with the clock; a
	// successor gives it the TTL from the resume.
	Pinned bool
	Holds  []SavedHold
}

// SavedHold is one hold of a saved lease with the nodes it lives in.
type SavedHold struct {
	Hold
	Nodes []string
}

// Adopter re-creates a holding of its recipe's kind from the saved hold h of
// lease l, under l's session (the resumed one, so the hold's nodes should be
// its own): it checks that every node exists and is owned by that session, and
// that the hold still stands by the recipe's rules (a lock's node heads its
// line). An error says why the hold cannot be kept.
type Adopter func(ctx context.Context, l *Lease, h SavedHold) (Holding, error)

// Adoption is how a successor takes over the holds of one hold kind
// (Hold.Kind) after a restart: Adopt re-creates each saved hold, and Lines
// is the node under which each of the recipe's things (a lock, a semaphore)
// is a line of contender nodes, so that nodes of the resumed session that no
// restored hold names can be found and deleted ("": its holds are in no
// line). Parts names the lines of a thing that has more than one, as
// children of its node (a semaphore's "locks" and "leases"); none: the
// thing's node is its line.
type Adoption struct {
	Adopt Adopter
	Lines string
	Parts []string
}

// RegisterAdoption makes a the way the saved holds of hold kind holdKind are
// resumed; call it before the resume begins (the sidecar hands over every
// recipe's, from api/registry, in one place). A saved hold of a kind nobody
// registered is reported lost; registering a hold kind twice panics.
func (m *Leases) RegisterAdoption(holdKind string, a Adoption) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.adoptions == nil {
		m.adoptions = map[string]Adoption{}
	}
	if _, dup := m.adoptions[holdKind]; dup {
		panic("kit: hold kind " + holdKind + " has two adoptions")
	}
	m.adoptions[holdKind] = a
}

// Change names what changed for a successor: lease Lease itself (granted,
// kept alive, pinned, unpinned or ended) when Hold is zero, else its hold
// Hold (granted, let go or lost).
type Change struct {
	Lease string
	Hold  Hold
}

// OnChange has the registry call f after every change a successor needs. f
// runs after the change is made, before the call that made it returns, so
// that a request that waits for f's record to be written (the state
// directory's Journal.Commit) is answered only then. f must not block
// (Journal.Changed).
func (m *Leases) OnChange(f func(Change)) { m.onChange.Store(&f) }

// changed tells the OnChange function, if any, that lease id changed: one
// atomic load on the request path.
func (m *Leases) changed(id string) {
	if f := m.onChange.Load(); f != nil {
		(*f)(Change{Lease: id})
	}
}

// SavedOf is lease id as Snapshot would list it but without its holds
// (SavedHoldOf gives each); false when no such lease is live.
func (m *Leases) SavedOf(id string) (SavedLease, bool) {
	m.mu.Lock()
	l := m.leases[id]
	m.mu.Unlock()
	if l == nil {
		return SavedLease{}, false
	}
	return l.saved(false)
}

// Snapshot lists every live lease with the holds that name their nodes
// (NodeHolding), sorted by lease id. It is safe to call alongside everything
// else: each lease is read under its own lock.
func (m *Leases) Snapshot() []SavedLease {
	m.mu.Lock()
	all := make([]*Lease, 0, len(m.leases))
	for _, l := range m.leases {
		all = append(all, l)
	}
	m.mu.Unlock()
	out := make([]SavedLease, 0, len(all))
	for _, l := range all {
		if s, ok := l.saved(true); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SavedHoldOf is hold h of lease id as Snapshot would list it; false when the
// lease is not live or does not hold h (or holds it in no node).
func (m *Leases) SavedHoldOf(id string, h Hold) (SavedHold, bool) {
	m.mu.Lock()
	l := m.leases[id]
	m.mu.Unlock()
	if l == nil {
		return SavedHold{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return SavedHold{}, false
	}
	e, ok := l.holds.get(h)
	if !ok || e.pending {
		return SavedHold{}, false
	}
	nh, ok := e.v.(NodeHolding)
	if !ok {
		return SavedHold{}, false
	}
	return SavedHold{Hold: h, Nodes: append([]string(nil), nh.HeldNodes()...)}, true
}

// saved is the lease as Snapshot gives it (its holds only withHolds); false
// once it has ended.
func (l *Lease) saved(withHolds bool) (SavedLease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return SavedLease{}, false
	}
	s := SavedLease{ID: l.ID, TTL: l.TTL, Owner: l.Owner, Implicit: l.Implicit, ExpiresAt: l.expiresAt, Pinned: l.pins > 0}
	if s.Pinned {
		s.ExpiresAt = time.Now().Add(l.TTL)
	}
	if !withHolds {
		return s, true
	}
	for h, e := range l.holds.all() {
		if nh, ok := e.v.(NodeHolding); ok && !e.pending {
			s.Holds = append(s.Holds, SavedHold{Hold: h, Nodes: append([]string(nil), nh.HeldNodes()...)})
		}
	}
	sort.Slice(s.Holds, func(i, j int) bool {
		if s.Holds[i].Kind != s.Holds[j].Kind {
			return s.Holds[i].Kind < s.Holds[j].Kind
		}
		return s.Holds[i].Name < s.Holds[j].Name
	})
	return s, true
}

// Restored is what Restore made of the saved leases.
type Restored struct {
	// Leases and Holds are the leases re-created and the holds adopted.
	Leases, Holds int
	// Expired counts the leases whose expiry passed while no process served
	// them: they ended as expired, their nodes deleted.
	Expired int
	// Swept counts the nodes of the session that no saved hold named, deleted.
	Swept int
	// Lost lists the holds that could not be adopted (node gone, another
	// session's, no adopter, an error): reported on their lease's stream as
	// lost holds, their nodes deleted where they were the session's.
	Lost []LostHold
}

// Restore re-creates saved under ep, the session the process resumed: each
// lease with its id, TTL, owner and expiry (one whose expiry has passed ends as
// expired, its nodes deleted), each hold adopted by its kind's Adopter. A hold
// that cannot be adopted is never kept silently: it is recorded as lost on its
// lease (its stream tells it as a lost-hold), counted and logged, and its
// nodes that ep owns are deleted so that nobody waits behind them. A lease id
// already live is left alone. A connection that drops meanwhile (the server
// ep's session is on dies) loses nothing: each step (an adoption, a deletion,
// a line's sweep) is tried again once the session is back on another server
// (zookeeper.Epoch.Retry), for as long as ctx lasts.
func (m *Leases) Restore(ctx context.Context, ep *zookeeper.Epoch, saved []SavedLease) (Restored, error) {
	ctx = context.WithValue(ctx, lineListingsKey{}, &lineListings{m: map[string][]string{}})
	var r Restored
	now := time.Now()
	type job struct {
		l *Lease
		h SavedHold
	}
	var jobs []job
	for _, s := range saved {
		if !s.ExpiresAt.After(now) {
			r.Expired++
			m.metrics.ended.WithLabelValues(EndReason(ErrLeaseExpired)).Inc()
			for _, h := range s.Holds {
				deleteOwned(ctx, ep, h.Nodes)
			}
			m.s.Logger().Info("lease expired while no process served it", "lease", s.ID, "expiredAt", s.ExpiresAt)
			continue
		}
		l, err := m.restoreLease(ep, s)
		if err != nil {
			return r, err
		}
		if l == nil {
			continue
		}
		r.Leases++
		for _, h := range s.Holds {
			jobs = append(jobs, job{l, h})
		}
	}
	var mu sync.Mutex
	inParallel(len(jobs), func(i int) {
		reason := m.adopt(ctx, jobs[i].l, jobs[i].h)
		mu.Lock()
		defer mu.Unlock()
		if reason != "" {
			r.Lost = append(r.Lost, LostHold{Hold: jobs[i].h.Hold, Reason: reason})
		} else {
			r.Holds++
		}
	})
	swept, err := m.sweep(ctx, ep, saved)
	r.Swept = swept
	return r, err
}

// restoreWorkers bounds the ZooKeeper calls a restore has in flight: enough
// to hide each call's round trip, few enough to leave the connection to the
// heartbeat (reads are pipelined on the one connection; a ping waits behind
// at most this many). 32 took 10,000 holds from SIGKILL to ready in 2.96 s,
// 128 in 2.1-2.4 s on the same busy machine (docs/BENCHMARKS.md, "Restarts").
const restoreWorkers = 128

// inParallel runs f(0) … f(n-1) on at most restoreWorkers goroutines and
// returns when every call has.
func inParallel(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, restoreWorkers) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// sweep deletes every node of ep's session in the lines of the registered
// kinds that no saved hold names: the nodes of requests that were waiting when
// the predecessor ended (granted to nobody, they would block every later
// contender) and of grants made after its last save (their client was never
// told, or its lease is unknown here). Only protected creates ("_c_" names)
// can be the sidecar's; each is read for its owner.
func (m *Leases) sweep(ctx context.Context, ep *zookeeper.Epoch, saved []SavedLease) (int, error) {
	keep := map[string]bool{}
	for _, s := range saved {
		for _, h := range s.Holds {
			for _, p := range h.Nodes {
				keep[p] = true
			}
		}
	}
	m.mu.Lock()
	var kinds []Adoption
	for _, k := range m.adoptions {
		if k.Lines != "" {
			kinds = append(kinds, k)
		}
	}
	m.mu.Unlock()
	var lines []string
	for _, k := range kinds {
		var names []string
		err := ep.Retry(ctx, func() (err error) {
			names, _, err = ep.Children(ctx, k.Lines)
			return err
		})
		if errors.Is(err, zookeeper.ErrNoNode) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("sweep %s: %w", k.Lines, err)
		}
		for _, name := range names {
			if len(k.Parts) == 0 {
				lines = append(lines, k.Lines+"/"+name)
			}
			for _, part := range k.Parts {
				lines = append(lines, k.Lines+"/"+name+"/"+part)
			}
		}
	}
	var mu sync.Mutex
	swept := 0
	var errs []error
	inParallel(len(lines), func(i int) {
		err := ep.Retry(ctx, func() error { // a line swept again: what went is not counted twice
			n, err := sweepLine(ctx, ep, lines[i], keep)
			mu.Lock()
			swept += n
			mu.Unlock()
			return err
		})
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
	})
	return swept, errors.Join(errs...)
}

// lineListings are the lines an Adopter listed during a Restore
// (RememberLine), for its sweep.
type lineListings struct {
	mu sync.Mutex
	m  map[string][]string
}

type lineListingsKey struct{}

// RememberLine records names as the children of line, listed by an Adopter
// under ctx (a Restore's), so that the sweep that ends the Restore reads them
// instead of listing the line again: 10,000 locks are 10,000 listings fewer.
// A listing taken after the session came back holds every node of the
// session in the line (the process serves nothing before the Restore ends,
// so no request adds one); a node deleted since is passed over by the
// sweep's own read of it.
func RememberLine(ctx context.Context, line string, names []string) {
	if ll, ok := ctx.Value(lineListingsKey{}).(*lineListings); ok {
		ll.mu.Lock()
		ll.m[line] = names
		ll.mu.Unlock()
	}
}

// rememberedLine is what RememberLine recorded for line under ctx.
func rememberedLine(ctx context.Context, line string) ([]string, bool) {
	ll, ok := ctx.Value(lineListingsKey{}).(*lineListings)
	if !ok {
		return nil, false
	}
	ll.mu.Lock()
	defer ll.mu.Unlock()
	names, ok := ll.m[line]
	return names, ok
}

// sweepLine deletes the nodes of line that ep's session owns and keep does not
// name.
func sweepLine(ctx context.Context, ep *zookeeper.Epoch, line string, keep map[string]bool) (int, error) {
	names, listed := rememberedLine(ctx, line)
	var err error
	if !listed {
		names, _, err = ep.Children(ctx, line)
	}
	if errors.Is(err, zookeeper.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sweep %s: %w", line, err)
	}
	swept := 0
	for _, name := range names {
		p := line + "/" + name
		if _, protected := zookeeper.GUIDOf(name); !protected || keep[p] {
			continue
		}
		ok, st, err := ep.Exists(ctx, p)
		if err != nil {
			return swept, fmt.Errorf("sweep %s: %w", p, err)
		}
		if !ok || st.EphemeralOwner != ep.ID() {
			continue
		}
		if err := ep.Delete(ctx, p, -1); err != nil && !errors.Is(err, zookeeper.ErrNoNode) {
			return swept, fmt.Errorf("sweep %s: %w", p, err)
		}
		swept++
	}
	return swept, nil
}

// restoreLease makes the lease of s under ep, its timer set for the saved
// expiry; nil when a lease of that id is live already.
func (m *Leases) restoreLease(ep *zookeeper.Epoch, s SavedLease) (*Lease, error) {
	l := &Lease{
		ID: s.ID, TTL: s.TTL, Implicit: s.Implicit, Owner: s.Owner,
		mgr: m, ep: ep,
		expiresAt: s.ExpiresAt,
	}
	if err := m.register(l, false); err != nil {
		if errors.Is(err, errLeaseLive) {
			return nil, nil
		}
		return nil, err
	}
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(s.ExpiresAt), l.onTimer)
	l.mu.Unlock()
	return l, nil
}

// adopt gives l the hold h through its kind's Adopter; on failure it records
// the hold as lost on l and deletes the nodes the session owns, and returns
// why.
func (m *Leases) adopt(ctx context.Context, l *Lease, h SavedHold) string {
	m.mu.Lock()
	f := m.adoptions[h.Kind].Adopt
	m.mu.Unlock()
	var reason string
	var v Holding
	err := l.ep.Retry(ctx, func() (err error) {
		v, err = adoptWith(ctx, f, l, h)
		return err
	})
	switch {
	case err != nil:
		reason = fmt.Sprintf("not kept across the restart: %v", err)
	default:
		e := &held{v: v, lease: l, h: h.Hold}
		l.mu.Lock()
		l.holds.set(h.Hold, e)
		l.mu.Unlock()
		l.watchNodes(e)
		return ""
	}
	deleteOwned(ctx, l.ep, h.Nodes)
	l.mu.Lock()
	l.lost.list = append(l.lost.list, LostHold{Hold: h.Hold, Reason: reason})
	l.mu.Unlock()
	m.metrics.holdsLost.WithLabelValues(h.Kind).Inc()
	m.s.Logger().Warn("hold lost", "lease", l.ID, "kind", h.Kind, "name", h.Name, "why", reason)
	return reason
}

// adoptWith runs f, or says that no recipe adopts h's kind.
func adoptWith(ctx context.Context, f Adopter, l *Lease, h SavedHold) (Holding, error) {
	if f == nil {
		return nil, fmt.Errorf("no recipe adopts holds of kind %q", h.Kind)
	}
	return f(ctx, l, h)
}

// deleteOwned deletes each of nodes that ep's session owns (best effort: a node
// gone already, or another session's, is left as it is; a connection that
// drops is waited out, as everywhere in a restore).
func deleteOwned(ctx context.Context, ep *zookeeper.Epoch, nodes []string) {
	for _, p := range nodes {
		_ = ep.Retry(ctx, func() error {
			ok, st, err := ep.Exists(ctx, p)
			if err != nil || !ok || st.EphemeralOwner != ep.ID() {
				return err
			}
			return ep.Delete(ctx, p, -1)
		})
	}
}

// OwnedNode reads node p under l's session and checks that the session owns it
// (an ephemeral node of the resumed session): the first step of every Adopter.
func OwnedNode(ctx context.Context, l *Lease, p string) ([]byte, *zookeeper.Stat, error) {
	data, st, err := l.ep.Get(ctx, p)
	if err != nil {
		return nil, nil, fmt.Errorf("node %s: %w", p, err)
	}
	if st.EphemeralOwner != l.ep.ID() {
		return nil, nil, fmt.Errorf("node %s is owned by session 0x%x, not this one (0x%x)", p, st.EphemeralOwner, l.ep.ID())
	}
	return data, st, nil
}

// ProtectedNode is the first step of every Adopter of a hold that lives in one
// protected create: h names exactly one node, a protected create directly
// under parent, which the resumed session of lease owns. It returns the node as
// its create had returned it (path, guid, czxid), its data and its stat. what
// names the hold in errors ("lock \"a\"").
func ProtectedNode(ctx context.Context, lease *Lease, h SavedHold, parent, what string) (zookeeper.Created, []byte, *zookeeper.Stat, error) {
	if len(h.Nodes) != 1 || path.Dir(h.Nodes[0]) != parent {
		return zookeeper.Created{}, nil, nil, fmt.Errorf("%s: saved nodes %v are not one node of %s", what, h.Nodes, parent)
	}
	p := h.Nodes[0]
	guid, ok := zookeeper.GUIDOf(path.Base(p))
	if !ok {
		return zookeeper.Created{}, nil, nil, fmt.Errorf("%s: node %s is not a protected create", what, p)
	}
	data, st, err := OwnedNode(ctx, lease, p)
	if err != nil {
		return zookeeper.Created{}, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return zookeeper.Created{Path: p, GUID: guid, Czxid: st.Czxid}, data, st, nil
}
