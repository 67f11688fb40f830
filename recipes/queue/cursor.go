package queue

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// queueState is what this sidecar knows of one queue's order, kept between takes
// (see the package documentation): per priority, the items of the head buckets
// it listed. It is only a cache: every decision is made by ZooKeeper (a delete
// that succeeds, a transaction that fails as a whole), so a stale cache costs a
// skipped item, never a wrong answer.
//
// Lock order: the watches' fired callbacks take st.mu under the Watches' lock,
// so st.mu is never held while calling st.watches.
type queueState struct {
	q    *Queues
	name string
	// watches are the one-shot watches armed on the queue's nodes, one per part
	// (a node's path; "?" prefix: an exists watch) until it fires. They are never
	// Reset: every watch fires when its session ends (EventNotWatching), which
	// marks what it covered dirty, so it is listed and armed again under the next
	// session.
	watches *kit.Watches

	mu         sync.Mutex
	prios      []int // priorities present, ascending
	priosKnown bool
	priosDirty bool // the queue's children may have changed since the last listing
	cursors    map[int]*queueCursor
	claimed    map[string]bool // item ids claimed now (any sidecar), from claims/
	// unclaims counts this sidecar's claims that ended; unclaimedAt is the count
	// at which each item's ended, until a listing of claims/ sent after it.
	unclaims    uint64
	unclaimedAt map[string]uint64
	inflight    map[string]bool  // item ids a local take or claim is trying
	arming      map[string]bool  // watches being armed (the call is under way), by part
	claimsEp    *zookeeper.Epoch // session of the running claims watcher
	changed     chan struct{}    // closed and replaced when an item may have appeared

	// What this sidecar knows of delayed/ (delay.go): its items sorted by due
	// time, kept by a watch, and the timer of the next one not yet due.
	delayed        []delayedRef
	delayedKnown   bool
	delayedDirty   bool // delayed/ may have changed since its last listing
	delayedKicked  bool // a background refresh is about to start
	delayedStopped bool // Close: no more timers or refreshes
	delayedTimer   *time.Timer
	dsem           chan struct{} // one refreshDelayed at a time

	bmu      sync.Mutex
	batchers map[int]*enqBatcher
}

// queueCursor is the cached order of one priority.
type queueCursor struct {
	items     []itemRef // sorted, claimed ones included (they come back in place)
	frontier  int64     // highest bucket listed into items; -1 unknown
	listed    bool      // frontier listed since it became the frontier
	closed    bool      // frontier was closed at its last listing
	dirty     bool      // frontier may have changed since its last listing
	refilling chan struct{}
}

// outcome is what one attempt on one item found.
type outcome int

const (
	outUnknown          outcome = iota // an error: keep the item, try later
	outWon                             // taken: the item is gone
	outClaimedHere                     // claimed by us: keep it in place, skipped while claimed
	outGone                            // someone else took it (or acked it)
	outClaimedElsewhere                // claimed by someone else
)

// actFn tries to take or claim r.
type actFn func(ctx context.Context, ep *zookeeper.Epoch, r itemRef) (outcome, error)

func newQueueState(q *Queues, name string) *queueState {
	return &queueState{
		q: q, name: name,
		watches:     kit.NewWatches(q.stop),
		priosDirty:  true,
		cursors:     map[int]*queueCursor{},
		claimed:     map[string]bool{},
		unclaimedAt: map[string]uint64{},
		inflight:    map[string]bool{},
		arming:      map[string]bool{},
		changed:     make(chan struct{}),
		dsem:        make(chan struct{}, 1),
		batchers:    map[int]*enqBatcher{},
	}
}

// changedCh returns a channel closed when an item may have become available.
func (st *queueState) changedCh() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.changed
}

func (st *queueState) broadcastLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

func (st *queueState) cursorLocked(p int) *queueCursor {
	c := st.cursors[p]
	if c == nil {
		c = &queueCursor{frontier: -1}
		st.cursors[p] = c
	}
	return c
}

// reserveWatch tells whether the caller is to arm part's watch: none is armed
// and no other caller is arming one. A true answer must be followed by
// watchArmed (the watch was set) or unreserveWatch (the call failed).
func (st *queueState) reserveWatch(part string) bool {
	st.mu.Lock()
	if st.arming[part] {
		st.mu.Unlock()
		return false
	}
	st.arming[part] = true
	st.mu.Unlock()
	if !st.watches.Need(part) {
		st.unreserveWatch(part)
		return false
	}
	return true
}

// unreserveWatch drops a reservation whose call failed: nothing is armed.
func (st *queueState) unreserveWatch(part string) {
	st.mu.Lock()
	delete(st.arming, part)
	st.mu.Unlock()
}

// watchArmed records ch as part's watch. When it fires, or is dropped with its
// session, fire runs under st.mu, part may be armed again, and waiting takers
// wake.
func (st *queueState) watchArmed(part string, ch <-chan zookeeper.Event, fire func()) {
	st.watches.Armed(part, ch, func() {
		st.mu.Lock()
		fire()
		st.broadcastLocked()
		st.mu.Unlock()
	})
	st.unreserveWatch(part)
}

// enqueued notes a local enqueue to priority p: waiting takers look again.
func (st *queueState) enqueued(p int) {
	st.mu.Lock()
	if c := st.cursors[p]; c != nil {
		c.dirty = true
	}
	if !slices.Contains(st.prios, p) {
		st.priosDirty = true
	}
	st.broadcastLocked()
	st.mu.Unlock()
}

// scan tries act on the available items in take order until it wins one; false
// when there is none.
func (st *queueState) scan(ctx context.Context, ep *zookeeper.Epoch, act actFn) (bool, error) {
	prios, err := st.priorities(ctx, ep)
	if err != nil {
		return false, err
	}
	for _, p := range prios {
		if found, err := st.scanPrio(ctx, ep, p, act); err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// scanPrio tries act on the available items of priority p in order until it
// wins one; false when there is none.
func (st *queueState) scanPrio(ctx context.Context, ep *zookeeper.Epoch, p int, act actFn) (bool, error) {
	for {
		if r, ok := st.pick(p); ok {
			out, err := act(ctx, ep, r)
			if drop, ok := st.finish(p, r, out); ok {
				st.q.dropBucket(ctx, ep, st.name, p, drop)
			}
			if err != nil {
				return false, err
			}
			if out == outWon || out == outClaimedHere {
				return true, nil
			}
			continue
		}
		more, err := st.refill(ctx, ep, p)
		if err != nil || !more {
			return false, err
		}
	}
}

// pick returns the first cached item of priority p that is neither claimed nor
// being tried, and marks it as being tried.
func (st *queueState) pick(p int) (itemRef, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.cursors[p]
	if c == nil {
		return itemRef{}, false
	}
	for _, r := range c.items {
		if !st.claimed[r.key] && !st.inflight[r.key] {
			st.inflight[r.key] = true
			return r, true
		}
	}
	return itemRef{}, false
}

func (st *queueState) hasCandidateLocked(c *queueCursor) bool {
	for _, r := range c.items {
		if !st.claimed[r.key] && !st.inflight[r.key] {
			return true
		}
	}
	return false
}

// finish records the outcome of an attempt on r. It returns a bucket to delete
// when r was the last cached item of a closed bucket.
func (st *queueState) finish(p int, r itemRef, out outcome) (int64, bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	delete(st.inflight, r.key)
	c := st.cursors[p]
	switch out {
	case outClaimedHere, outClaimedElsewhere:
		st.claimed[r.key] = true
		return 0, false
	case outWon, outGone:
	default:
		return 0, false
	}
	if c == nil {
		return 0, false
	}
	i := sort.Search(len(c.items), func(i int) bool { return !c.items[i].before(r) })
	if i < len(c.items) && c.items[i].name == r.name && c.items[i].bucket == r.bucket {
		c.items = slices.Delete(c.items, i, i+1)
	}
	passed := r.bucket < c.frontier || (r.bucket == c.frontier && c.closed)
	if !passed {
		return 0, false
	}
	for _, o := range c.items {
		if o.bucket == r.bucket {
			return 0, false
		}
	}
	return r.bucket, true
}

// refillStep is what one step of a refill found.
type refillStep int

const (
	refillFound refillStep = iota // a candidate is cached now
	refillEmpty                   // nothing more in this priority for now
	refillNext                    // the frontier was closed and is passed: list the next bucket
	refillAgain                   // the frontier moved on: look at the new one
)

// refill lists what comes next in priority p when the cache has no candidate:
// the frontier bucket again when it may have changed, then the next buckets while
// the frontier is closed. It reports whether there may be a candidate now. One
// refill of a priority runs at a time; a caller that finds one under way waits
// for it and then looks at what it found.
func (st *queueState) refill(ctx context.Context, ep *zookeeper.Epoch, p int) (bool, error) {
	c, done, more, err := st.startRefill(ctx, p)
	if done == nil {
		return more, err
	}
	defer st.endRefill(c, done)
	if ok, err := st.findHead(ctx, ep, p, c); err != nil || !ok {
		return false, err
	}
	for {
		step, err := st.refillStep(ctx, ep, p, c)
		switch {
		case err != nil:
			return false, err
		case step == refillFound:
			return true, nil
		case step == refillEmpty:
			return false, nil
		}
	}
}

// startRefill makes the caller priority p's refiller (done is not nil: call
// endRefill with it), unless a refill is under way (it waits for it: more) or
// the cache has a candidate after all (more).
func (st *queueState) startRefill(ctx context.Context, p int) (c *queueCursor, done chan struct{}, more bool, err error) {
	st.mu.Lock()
	c = st.cursorLocked(p)
	if ch := c.refilling; ch != nil {
		st.mu.Unlock()
		select {
		case <-ch:
			return c, nil, true, nil // look at what the other refill found
		case <-ctx.Done():
			return c, nil, false, ctx.Err()
		}
	}
	if st.hasCandidateLocked(c) {
		st.mu.Unlock()
		return c, nil, true, nil
	}
	done = make(chan struct{})
	c.refilling = done
	st.mu.Unlock()
	return c, done, false, nil
}

func (st *queueState) endRefill(c *queueCursor, done chan struct{}) {
	st.mu.Lock()
	c.refilling = nil
	close(done)
	st.mu.Unlock()
}

// findHead makes sure c has a frontier: the head bucket of priority p, when
// there is one (false otherwise).
func (st *queueState) findHead(ctx context.Context, ep *zookeeper.Epoch, p int, c *queueCursor) (bool, error) {
	st.mu.Lock()
	known := c.frontier >= 0
	st.mu.Unlock()
	if known {
		return true, nil
	}
	head, ok, err := st.firstBucket(ctx, ep, p)
	if err != nil || !ok {
		return false, err
	}
	st.mu.Lock()
	c.frontier, c.listed, c.closed = head, false, false
	st.mu.Unlock()
	return true, nil
}

// refillStep lists the frontier bucket when it may have changed and moves past
// it when it is closed.
func (st *queueState) refillStep(ctx context.Context, ep *zookeeper.Epoch, p int, c *queueCursor) (refillStep, error) {
	st.mu.Lock()
	b := c.frontier
	need := !c.listed || (c.dirty && !c.closed) // a closed bucket gains nothing
	if need {
		c.dirty = false
	}
	closed := c.closed
	st.mu.Unlock()
	if need {
		step, err := st.listFrontier(ctx, ep, p, c, b)
		if err != nil || step != refillNext {
			return step, err
		}
	} else if !closed {
		return refillEmpty, nil // nothing new since the last listing: its watch says so
	}
	// The frontier is closed: the next bucket exists (it was made in the same
	// transaction that closed this one).
	st.mu.Lock()
	c.frontier, c.listed, c.closed, c.dirty = b+1, false, false, false
	st.mu.Unlock()
	return refillNext, nil
}

// listFrontier lists frontier bucket b into c's cache, leaving a watch on it
// unless one is armed. A closed bucket found empty is deleted.
func (st *queueState) listFrontier(ctx context.Context, ep *zookeeper.Epoch, p int, c *queueCursor, b int64) (refillStep, error) {
	q := st.q
	path := q.bpath(st.name, p, b)
	arm := st.reserveWatch(path)
	names, stat, watch, err := q.listBucket(ctx, ep, path, arm)
	if err != nil {
		if arm {
			st.unreserveWatch(path)
		}
		st.mu.Lock()
		c.dirty = true
		st.mu.Unlock()
		if !errors.Is(err, zookeeper.ErrNoNode) {
			return refillEmpty, err
		}
		return st.skipDeleted(ctx, ep, p, c, b)
	}
	if arm {
		st.watchArmed(path, watch, func() {
			if c.frontier == b {
				c.dirty = true
			}
		})
	}
	refs := bucketRefs(p, b, names)
	q.metrics.listings.Inc()
	st.mu.Lock()
	c.items = append(slices.DeleteFunc(c.items, func(r itemRef) bool { return r.bucket >= b }), refs...)
	c.listed, c.closed = true, stat.Version >= 1
	cand, closed := st.hasCandidateLocked(c), c.closed
	st.mu.Unlock()
	switch {
	case cand:
		return refillFound, nil
	case !closed:
		return refillEmpty, nil
	}
	if len(refs) == 0 {
		q.dropBucket(ctx, ep, st.name, p, b)
	}
	return refillNext, nil
}

// skipDeleted moves c's frontier past bucket b, which another taker closed,
// drained and deleted, to the next bucket there is (refillAgain), if any.
func (st *queueState) skipDeleted(ctx context.Context, ep *zookeeper.Epoch, p int, c *queueCursor, b int64) (refillStep, error) {
	next, ok, err := st.q.headBucket(ctx, ep, st.name, p, b)
	if err != nil {
		return refillEmpty, err
	}
	st.mu.Lock()
	c.items = slices.DeleteFunc(c.items, func(r itemRef) bool { return r.bucket == b })
	if ok {
		c.frontier, c.listed, c.closed, c.dirty = next, false, false, false
	} else {
		c.frontier = -1
	}
	st.mu.Unlock()
	if !ok {
		return refillEmpty, nil
	}
	return refillAgain, nil
}

// firstBucket finds the head bucket of priority p. When there is none yet (the
// priority was just made) it leaves a watch that wakes waiting takers when the
// first bucket appears.
func (st *queueState) firstBucket(ctx context.Context, ep *zookeeper.Epoch, p int) (int64, bool, error) {
	children, err := st.listArmed(ctx, ep, st.q.ppath(st.name, p), func() {})
	if err != nil {
		if errors.Is(err, zookeeper.ErrNoNode) {
			return 0, false, nil
		}
		return 0, false, err
	}
	head, ok := int64(-1), false
	for _, ch := range children {
		if b, valid := parseBucket(ch); valid && (!ok || b < head) {
			head, ok = b, true
		}
	}
	return head, ok, nil
}

// listArmed lists path's children and leaves a children watch on it unless one is
// armed already (watches are one-shot: armed again only once fired, then fired
// runs, as watchArmed says). A failed listing leaves nothing armed.
func (st *queueState) listArmed(ctx context.Context, ep *zookeeper.Epoch, path string, fired func()) ([]string, error) {
	arm := st.reserveWatch(path)
	var children []string
	var watch <-chan zookeeper.Event
	var err error
	if arm {
		children, _, watch, err = ep.ChildrenW(ctx, path)
	} else {
		children, _, err = ep.Children(ctx, path)
	}
	switch {
	case err != nil && arm:
		st.unreserveWatch(path)
	case arm:
		st.watchArmed(path, watch, fired)
	}
	return children, err
}

// priorities returns the queue's priorities, listing them only when they may have
// changed (a watch tells).
func (st *queueState) priorities(ctx context.Context, ep *zookeeper.Epoch) ([]int, error) {
	q := st.q
	path := q.qpath(st.name)
	st.mu.Lock()
	if st.priosKnown && !st.priosDirty {
		out := slices.Clone(st.prios)
		st.mu.Unlock()
		return out, nil
	}
	st.priosDirty = false
	st.mu.Unlock()
	children, err := st.listArmed(ctx, ep, path, func() { st.priosDirty = true })
	if err != nil {
		st.mu.Lock()
		st.priosDirty = true
		st.mu.Unlock()
		if errors.Is(err, zookeeper.ErrNoNode) {
			return nil, st.awaitQueue(ctx, ep, path)
		}
		return nil, err
	}
	var prios []int
	for _, ch := range children {
		if p, ok := parsePrio(ch); ok {
			prios = append(prios, p)
		}
	}
	slices.Sort(prios)
	st.mu.Lock()
	st.prios, st.priosKnown = prios, true
	st.mu.Unlock()
	return prios, nil
}

// awaitQueue arms a watch on the creation of a queue that does not exist yet.
func (st *queueState) awaitQueue(ctx context.Context, ep *zookeeper.Epoch, path string) error {
	key := "?" + path
	if !st.reserveWatch(key) {
		st.mu.Lock()
		st.priosKnown, st.prios, st.priosDirty = true, nil, false
		st.mu.Unlock()
		return nil
	}
	exists, _, watch, err := ep.ExistsW(ctx, path)
	if err != nil {
		st.unreserveWatch(key)
		return err
	}
	st.watchArmed(key, watch, func() { st.priosDirty = true })
	st.mu.Lock()
	if exists {
		// Made since the listing that found no node. This watch is on the node
		// itself: it will not fire for an item added below it, so waiting takers
		// must list the queue now, with a children watch.
		st.priosDirty = true
		st.broadcastLocked()
	} else {
		st.priosKnown, st.prios, st.priosDirty = true, nil, false
	}
	st.mu.Unlock()
	return nil
}

// ensureClaimsWatch keeps one watcher of claims/ running on ep, on a goroutine
// of the Session (it ends when ep's session is gone).
func (st *queueState) ensureClaimsWatch(ep *zookeeper.Epoch) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.claimsEp == ep {
		return
	}
	st.claimsEp = ep
	if !st.q.s.Go(func() { st.watchClaims(ep) }) {
		st.claimsEp = nil // the Session is closing: nothing to watch
	}
}

// watchClaims mirrors claims/ into st.claimed until ep's session is gone.
func (st *queueState) watchClaims(ep *zookeeper.Epoch) {
	defer func() {
		st.mu.Lock()
		if st.claimsEp == ep {
			st.claimsEp = nil
		}
		st.mu.Unlock()
	}()
	path := st.q.cpath(st.name)
	ctx := context.Background()
	for !ep.IsLost() {
		sent := st.unclaimCount()
		children, _, watch, err := ep.ChildrenW(ctx, path)
		listed, exists := err == nil, false
		if errors.Is(err, zookeeper.ErrNoNode) {
			exists, _, watch, err = ep.ExistsW(ctx, path)
		}
		if err != nil {
			if errors.Is(err, kit.ErrUnavailable) && ep.WaitConnected(ctx) == nil {
				continue
			}
			return
		}
		st.setClaimed(children, sent)
		if !listed && exists {
			continue // created just now: list it
		}
		if ev := <-watch; ev.Type == zookeeper.EventNotWatching {
			return
		}
	}
}

// unclaimCount is how many of this sidecar's claims have ended so far.
func (st *queueState) unclaimCount() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.unclaims
}

// setClaimed replaces the claimed set with a listing of claims/ sent when
// unclaimCount was sent; items no longer claimed are candidates again, in their
// old place. An item whose claim ended here after the listing was sent is not
// claimed again by it: the listing may predate the markers' delete (whose
// change fires the watch armed with it), and the item is first in line at once.
func (st *queueState) setClaimed(children []string, sent uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	next := make(map[string]bool, len(children))
	for _, c := range children {
		if st.unclaimedAt[c] <= sent {
			next[c] = true
		}
	}
	for k, at := range st.unclaimedAt {
		if at <= sent {
			delete(st.unclaimedAt, k) // this listing was sent after that claim ended
		}
	}
	freed := false
	for k := range st.claimed {
		if !next[k] {
			freed = true
			break
		}
	}
	st.claimed = next
	if freed {
		st.broadcastLocked()
	}
}

// unclaim forgets a claim of this sidecar that ended: the item is a candidate
// again, or, when it was acked (taken), it leaves the cache. It returns a bucket
// to delete when the acked item was the last cached one of a closed bucket.
func (st *queueState) unclaim(r itemRef, taken bool) (int64, bool) {
	st.mu.Lock()
	st.unclaims++
	st.unclaimedAt[r.key] = st.unclaims
	delete(st.claimed, r.key)
	st.broadcastLocked()
	st.mu.Unlock()
	if !taken {
		return 0, false
	}
	return st.finish(r.prio, r, outWon)
}
