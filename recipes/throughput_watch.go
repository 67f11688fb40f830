package recipes

import (
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// ThroughputFollower follows one group. However many followers a group has on
// this sidecar (members, streams, long-polls), the sidecar holds one watcher for
// it: a watch on the group node, on the members' list, on each member's data and
// on the allocation, each re-armed only when it fires, and one cached state.
// The same watcher computes and publishes the allocation while this sidecar
// owns the group's first member node.
type ThroughputFollower struct {
	w    *groupWatch
	once sync.Once
}

// groupWatch is the one watcher of a group on this sidecar.
type groupWatch struct {
	t     *Throughputs
	group string
	gp    string

	mu      sync.Mutex
	state   *ThroughputGroup
	loaded  bool
	changed chan struct{}
	leading bool
	gen     int // the session generation the watches below were set under

	// What was read, valid while its watch is outstanding (the flag is set).
	groupWatched   bool
	exists         bool
	limit          int64
	membersWatched bool
	names          []string          // member nodes in sequence order
	members        map[string]member // node → data (each with a data watch)
	allocWatched   bool
	alloc          *allocationData
	allocVer       int32

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// Follow starts following group; Close stops. The first state is available
// once read (Changed closes then).
func (t *Throughputs) Follow(group string) (*ThroughputFollower, error) {
	if err := CheckName("group", group); err != nil {
		return nil, err
	}
	w := t.watches.acquire(group, func() (*groupWatch, func()) {
		w := &groupWatch{
			t: t, group: group, gp: t.groupPath(group), changed: make(chan struct{}),
			members: map[string]member{},
			wake:    make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		}
		go w.run()
		return w, func() { close(w.stop); <-w.done }
	})
	return &ThroughputFollower{w: w}, nil
}

// State returns the latest state and whether one has been read yet.
func (f *ThroughputFollower) State() (*ThroughputGroup, bool) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return f.w.state, f.w.loaded
}

// Changed returns a channel closed at the next change of State.
func (f *ThroughputFollower) Changed() <-chan struct{} {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return f.w.changed
}

// Close stops following; the last follower's Close stops the watcher.
func (f *ThroughputFollower) Close() {
	f.once.Do(func() { f.w.t.watches.release(f.w.group) })
}

// await waits up to d (and while ctx lasts) for a state, read under a connected
// session, for which cond holds. It returns the last state seen and whether
// cond held for it.
func (f *ThroughputFollower) await(ctx context.Context, d time.Duration, cond func(*ThroughputGroup) bool) (*ThroughputGroup, bool) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		changed := f.Changed()
		st, ok := f.State()
		if ok && !st.Suspended && cond(st) {
			return st, true
		}
		select {
		case <-changed:
		case <-timer.C:
			return st, false
		case <-ctx.Done():
			return st, false
		}
	}
}

func (w *groupWatch) run() {
	defer close(w.done)
	defer w.setLeading(false)
	watchLoop(w.t.s, w.stop, w.wake, func(ctx context.Context, ep *epoch, fresh bool) error {
		if fresh {
			w.reset()
		}
		if err := w.refresh(ctx, ep); err != nil {
			return err
		}
		err := w.lead(ctx, ep)
		w.publish()
		return err
	}, func() {
		w.suspend()
		w.setLeading(false)
	})
}

// reset forgets everything read under an earlier session: its watches are gone.
func (w *groupWatch) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gen++
	w.groupWatched, w.membersWatched, w.allocWatched = false, false, false
	w.names, w.members, w.alloc = nil, map[string]member{}, nil
}

// refresh reads again what is not covered by an outstanding watch: the group,
// the members' list and the allocation together, then the data of the members
// not read yet (pipelined).
func (w *groupWatch) refresh(ctx context.Context, ep *epoch) error {
	w.mu.Lock()
	gen := w.gen
	var fns []func() error
	if !w.groupWatched {
		fns = append(fns, func() error { return w.readGroup(ctx, ep, gen) })
	}
	if !w.membersWatched {
		fns = append(fns, func() error { return w.readMembers(ctx, ep, gen) })
	}
	if !w.allocWatched {
		fns = append(fns, func() error { return w.readAlloc(ctx, ep, gen) })
	}
	w.mu.Unlock()
	if len(fns) > 0 {
		if err := parallel(fns...); err != nil {
			return err
		}
	}
	w.mu.Lock()
	var missing []string
	for _, n := range w.names {
		if _, ok := w.members[n]; !ok {
			missing = append(missing, n)
		}
	}
	w.mu.Unlock()
	fns = fns[:0]
	for _, n := range missing {
		fns = append(fns, func() error { return w.readMember(ctx, ep, gen, n) })
	}
	if len(fns) > 0 {
		return parallel(fns...)
	}
	return nil
}

func (w *groupWatch) readGroup(ctx context.Context, ep *epoch, gen int) error {
	return ep.call(ctx, func(c *zk.Conn) error {
		data, _, ch, err := c.GetW(w.gp)
		if errors.Is(err, zk.ErrNoNode) {
			return w.watchAbsent(c, w.gp, gen, &w.groupWatched, func() { w.exists, w.limit = false, 0 })
		}
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.exists, w.limit = true, decodeGroup(data)
		w.mu.Unlock()
		w.arm(ch, gen, &w.groupWatched, nil)
		return nil
	})
}

func (w *groupWatch) readMembers(ctx context.Context, ep *epoch, gen int) error {
	mp := w.gp + "/members"
	return ep.call(ctx, func(c *zk.Conn) error {
		names, _, ch, err := c.ChildrenW(mp)
		if errors.Is(err, zk.ErrNoNode) {
			return w.watchAbsent(c, mp, gen, &w.membersWatched, func() { w.names = nil })
		}
		if err != nil {
			return err
		}
		line := sortBySeq(names)
		w.mu.Lock()
		w.names = line
		keep := make(map[string]bool, len(line))
		for _, n := range line {
			keep[n] = true
		}
		maps.DeleteFunc(w.members, func(n string, _ member) bool { return !keep[n] })
		w.mu.Unlock()
		w.arm(ch, gen, &w.membersWatched, nil)
		return nil
	})
}

func (w *groupWatch) readAlloc(ctx context.Context, ep *epoch, gen int) error {
	ap := w.gp + "/allocation"
	return ep.call(ctx, func(c *zk.Conn) error {
		data, st, ch, err := c.GetW(ap)
		if errors.Is(err, zk.ErrNoNode) {
			return w.watchAbsent(c, ap, gen, &w.allocWatched, func() { w.alloc = nil })
		}
		if err != nil {
			return err
		}
		a, derr := decodeAllocation(data)
		if derr != nil {
			a = &allocationData{} // unreadable: the leader writes over it
		}
		w.mu.Lock()
		w.alloc, w.allocVer = a, st.Version
		w.mu.Unlock()
		w.arm(ch, gen, &w.allocWatched, nil)
		return nil
	})
}

func (w *groupWatch) readMember(ctx context.Context, ep *epoch, gen int, node string) error {
	return ep.call(ctx, func(c *zk.Conn) error {
		data, st, ch, err := c.GetW(w.gp + "/members/" + node)
		if errors.Is(err, zk.ErrNoNode) {
			return nil // gone meanwhile: the members' watch reports it
		}
		if err != nil {
			return err
		}
		m := member{node: node, data: decodeMember(node, data), czxid: st.Czxid, owner: st.EphemeralOwner}
		w.mu.Lock()
		if w.gen == gen {
			w.members[node] = m
		}
		w.mu.Unlock()
		w.forward(ch, gen, func() { delete(w.members, node) })
		return nil
	})
}

// watchAbsent leaves an existence watch on a node found missing and records it
// as absent (absent runs under w.mu). If the node appeared in between, nothing
// is recorded and the watcher reads again.
func (w *groupWatch) watchAbsent(c *zk.Conn, p string, gen int, flag *bool, absent func()) error {
	ok, _, ch, err := c.ExistsW(p)
	if err != nil {
		return err
	}
	if ok {
		w.forward(ch, gen, func() {})
		w.poke()
		return nil
	}
	w.mu.Lock()
	absent()
	w.mu.Unlock()
	w.arm(ch, gen, flag, nil)
	return nil
}

// arm records an outstanding watch: *flag is set now and cleared when ch fires.
func (w *groupWatch) arm(ch <-chan zk.Event, gen int, flag *bool, fired func()) {
	w.mu.Lock()
	if w.gen == gen {
		*flag = true
	}
	w.mu.Unlock()
	w.forward(ch, gen, func() {
		*flag = false
		if fired != nil {
			fired()
		}
	})
}

// forward runs fired (under w.mu, unless the session changed since) and wakes
// the watcher when ch delivers; it gives up when the watcher stops.
func (w *groupWatch) forward(ch <-chan zk.Event, gen int, fired func()) {
	go func() {
		select {
		case <-ch:
			w.mu.Lock()
			if w.gen == gen {
				fired()
			}
			w.mu.Unlock()
			w.poke()
		case <-w.stop:
		}
	}()
}

func (w *groupWatch) poke() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// line returns the live members read, in join order.
func (w *groupWatch) lineLocked() []member {
	line := make([]member, 0, len(w.names))
	for _, n := range w.names {
		if m, ok := w.members[n]; ok {
			line = append(line, m)
		}
	}
	return line
}

// lead publishes the allocation when this sidecar's session owns the first
// member node (or the group has no member and its allocation still lists some).
// A write that loses its compare-and-set is counted and left: the watch on
// whatever changed (allocation or members) wakes the watcher to read again.
func (w *groupWatch) lead(ctx context.Context, ep *epoch) error {
	w.mu.Lock()
	line := w.lineLocked()
	exists, limit, prev, ver := w.exists, w.limit, w.alloc, w.allocVer
	w.mu.Unlock()
	leading := len(line) > 0 && line[0].owner == ep.id.Load()
	w.setLeading(leading)
	var next *allocationData
	switch {
	case leading:
		next = compute(limit, line)
	case len(line) == 0:
		next = emptyAllocation(exists, limit, line)
	}
	if next == nil || (prev != nil && sameAllocation(prev, next)) {
		return nil
	}
	newVer, err := writeAllocation(ctx, ep, w.gp+"/allocation", prev, ver, next)
	switch {
	case err == nil:
		w.t.metrics.allocations.Inc()
		w.mu.Lock()
		if w.alloc == prev { // nothing newer was read meanwhile
			w.alloc, w.allocVer = next, newVer
		}
		w.mu.Unlock()
		return nil
	case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrNoNode):
		w.t.metrics.conflicts.Inc()
		return nil
	case errors.Is(err, errStaleTerm):
		w.t.metrics.conflicts.Inc()
		w.t.s.log.Warn("throughput allocation not written: a higher term wrote it", "group", w.group, "err", err)
		return nil
	}
	return err
}

func (w *groupWatch) setLeading(leading bool) {
	w.mu.Lock()
	was := w.leading
	w.leading = leading
	w.mu.Unlock()
	switch {
	case leading && !was:
		w.t.metrics.led.Inc()
	case !leading && was:
		w.t.metrics.led.Dec()
	}
}

// publish makes the cached allocation and members the followers' state when
// they differ from it.
func (w *groupWatch) publish() {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := view(w.group, w.limit, w.lineLocked(), w.alloc)
	if w.loaded && !w.state.Suspended && w.state.Version == st.Version && w.state.Limit == st.Limit &&
		maps.Equal(w.state.live, st.live) {
		return
	}
	w.setLocked(st)
}

// suspend marks the state as possibly stale (the session is not connected).
func (w *groupWatch) suspend() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.loaded && w.state.Suspended {
		return
	}
	st := &ThroughputGroup{Group: w.group, Members: []ThroughputMember{}}
	if w.state != nil {
		cp := *w.state
		st = &cp
	}
	st.Suspended = true
	w.setLocked(st)
}

func (w *groupWatch) setLocked(st *ThroughputGroup) {
	w.state, w.loaded = st, true
	close(w.changed)
	w.changed = make(chan struct{})
}
