package recipes

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"

	"github.com/go-zookeeper/zk"
)

// queueState is what this sidecar knows of one queue's order, kept between takes
// (see Queues): per priority, the items of the head buckets it listed. It is
// only a cache: every decision is made by ZooKeeper (a delete that succeeds, a
// transaction that fails as a whole), so a stale cache costs a skipped item,
// never a wrong answer.
type queueState struct {
	q    *Queues
	name string

	mu         sync.Mutex
	prios      []int // priorities present, ascending
	priosKnown bool
	priosDirty bool // the queue's children may have changed since the last listing
	cursors    map[int]*queueCursor
	claimed    map[string]bool // item ids claimed now (any sidecar), from claims/
	inflight   map[string]bool // item ids a local take or claim is trying
	armed      map[string]bool // watches pending, by path ("?" prefix: exists watch)
	claimsEp   *epoch          // session of the running claims watcher
	changed    chan struct{}   // closed and replaced when an item may have appeared

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
type actFn func(ctx context.Context, ep *epoch, r itemRef) (outcome, error)

func newQueueState(q *Queues, name string) *queueState {
	return &queueState{
		q: q, name: name,
		priosDirty: true,
		cursors:    map[int]*queueCursor{},
		claimed:    map[string]bool{},
		inflight:   map[string]bool{},
		armed:      map[string]bool{},
		changed:    make(chan struct{}),
		batchers:   map[int]*enqBatcher{},
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
func (st *queueState) scan(ctx context.Context, ep *epoch, act actFn) (bool, error) {
	prios, err := st.priorities(ctx, ep)
	if err != nil {
		return false, err
	}
	for _, p := range prios {
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
			if err != nil {
				return false, err
			}
			if !more {
				break
			}
		}
	}
	return false, nil
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

// refill lists what comes next in priority p when the cache has no candidate:
// the frontier bucket again when it may have changed, then the next buckets while
// the frontier is closed. It reports whether there may be a candidate now.
func (st *queueState) refill(ctx context.Context, ep *epoch, p int) (bool, error) {
	st.mu.Lock()
	c := st.cursorLocked(p)
	if ch := c.refilling; ch != nil {
		st.mu.Unlock()
		select {
		case <-ch:
			return true, nil // look at what the other refill found
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if st.hasCandidateLocked(c) {
		st.mu.Unlock()
		return true, nil
	}
	done := make(chan struct{})
	c.refilling = done
	st.mu.Unlock()
	defer func() {
		st.mu.Lock()
		c.refilling = nil
		close(done)
		st.mu.Unlock()
	}()

	q := st.q
	st.mu.Lock()
	unknownHead := c.frontier < 0
	st.mu.Unlock()
	if unknownHead {
		head, ok, err := st.firstBucket(ctx, ep, p)
		if err != nil || !ok {
			return false, err
		}
		st.mu.Lock()
		c.frontier, c.listed, c.closed = head, false, false
		st.mu.Unlock()
	}
	for {
		st.mu.Lock()
		b := c.frontier
		need := !c.listed || (c.dirty && !c.closed) // a closed bucket gains nothing
		path := q.bpath(st.name, p, b)
		arm := need && !st.armed[path]
		if need {
			c.dirty = false
		}
		if arm {
			st.armed[path] = true
		}
		st.mu.Unlock()
		if need {
			names, stat, watch, err := q.listBucket(ctx, ep, path, arm)
			if err != nil {
				st.mu.Lock()
				if arm {
					delete(st.armed, path)
				}
				c.dirty = true
				st.mu.Unlock()
				if !errors.Is(err, zk.ErrNoNode) {
					return false, err
				}
				// Closed, drained and deleted by another taker: on to the next one.
				next, ok, err := q.headBucket(ctx, ep, st.name, p, b)
				if err != nil {
					return false, err
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
					return false, nil
				}
				continue
			}
			if arm {
				st.watch(path, watch, func() {
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
			if cand {
				return true, nil
			}
			if !closed {
				return false, nil
			}
			if len(refs) == 0 {
				q.dropBucket(ctx, ep, st.name, p, b)
			}
		} else {
			st.mu.Lock()
			closed := c.closed
			st.mu.Unlock()
			if !closed {
				return false, nil // nothing new since the last listing: its watch says so
			}
		}
		// The frontier is closed: the next bucket exists (it was made in the same
		// transaction that closed this one).
		st.mu.Lock()
		c.frontier, c.listed, c.closed, c.dirty = b+1, false, false, false
		st.mu.Unlock()
	}
}

// firstBucket finds the head bucket of priority p. When there is none yet (the
// priority was just made) it leaves a watch that wakes waiting takers when the
// first bucket appears.
func (st *queueState) firstBucket(ctx context.Context, ep *epoch, p int) (int64, bool, error) {
	children, err := st.listArmed(ctx, ep, st.q.ppath(st.name, p), func() {})
	if err != nil {
		if errors.Is(err, zk.ErrNoNode) {
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
// outstanding already (watches are one-shot: armed again only once fired, then
// fired runs, as st.watch says). A failed listing leaves nothing armed.
func (st *queueState) listArmed(ctx context.Context, ep *epoch, path string, fired func()) ([]string, error) {
	st.mu.Lock()
	arm := !st.armed[path]
	if arm {
		st.armed[path] = true
	}
	st.mu.Unlock()
	var children []string
	var watch <-chan zk.Event
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		if arm {
			children, _, watch, err = c.ChildrenW(path)
		} else {
			children, _, err = c.Children(path)
		}
		return err
	})
	switch {
	case err != nil && arm:
		st.mu.Lock()
		delete(st.armed, path)
		st.mu.Unlock()
	case arm:
		st.watch(path, watch, fired)
	}
	return children, err
}

// bucketRefs turns a bucket listing into sorted item refs.
func bucketRefs(p int, b int64, names []string) []itemRef {
	refs := make([]itemRef, 0, len(names))
	for _, n := range names {
		seq, _, _, ok := parseItemName(n)
		if !ok {
			continue
		}
		r := itemRef{prio: p, bucket: b, seq: seq, name: n}
		r.key = r.id()
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b itemRef) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	return refs
}

// priorities returns the queue's priorities, listing them only when they may have
// changed (a watch tells).
func (st *queueState) priorities(ctx context.Context, ep *epoch) ([]int, error) {
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
		if errors.Is(err, zk.ErrNoNode) {
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
func (st *queueState) awaitQueue(ctx context.Context, ep *epoch, path string) error {
	key := "?" + path
	st.mu.Lock()
	if st.armed[key] {
		st.priosKnown, st.prios, st.priosDirty = true, nil, false
		st.mu.Unlock()
		return nil
	}
	st.armed[key] = true
	st.mu.Unlock()
	var exists bool
	var watch <-chan zk.Event
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		exists, _, watch, err = c.ExistsW(path)
		return err
	})
	if err != nil {
		st.mu.Lock()
		delete(st.armed, key)
		st.mu.Unlock()
		return err
	}
	st.watch(key, watch, func() { st.priosDirty = true })
	st.mu.Lock()
	if exists {
		st.priosDirty = true // created just now: list it next time
	} else {
		st.priosKnown, st.prios, st.priosDirty = true, nil, false
	}
	st.mu.Unlock()
	return nil
}

// watch runs fire (under st.mu) when the watch on key triggers, or when it is
// dropped with its session, and wakes waiting takers.
func (st *queueState) watch(key string, ch <-chan zk.Event, fire func()) {
	go func() {
		<-ch
		st.mu.Lock()
		delete(st.armed, key)
		fire()
		st.broadcastLocked()
		st.mu.Unlock()
	}()
}

// ensureClaimsWatch keeps one watcher of claims/ running on ep.
func (st *queueState) ensureClaimsWatch(ep *epoch) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.claimsEp == ep {
		return
	}
	st.claimsEp = ep
	go st.watchClaims(ep)
}

// watchClaims mirrors claims/ into st.claimed until ep's session is gone.
func (st *queueState) watchClaims(ep *epoch) {
	defer func() {
		st.mu.Lock()
		if st.claimsEp == ep {
			st.claimsEp = nil
		}
		st.mu.Unlock()
	}()
	path := st.q.cpath(st.name)
	for !ep.isLost() {
		var children []string
		var watch <-chan zk.Event
		listed, exists := false, false
		err := ep.call(context.Background(), func(c *zk.Conn) error {
			var err error
			if children, _, watch, err = c.ChildrenW(path); err == nil {
				listed = true
				return nil
			}
			if errors.Is(err, zk.ErrNoNode) {
				exists, _, watch, err = c.ExistsW(path)
			}
			return err
		})
		if err != nil {
			if errors.Is(err, ErrUnavailable) && waitConnected(context.Background(), ep) == nil {
				continue
			}
			return
		}
		st.setClaimed(children)
		if !listed && exists {
			continue // created just now: list it
		}
		if ev := <-watch; ev.Type == zk.EventNotWatching {
			return
		}
	}
}

// setClaimed replaces the claimed set with a listing of claims/; items no longer
// claimed are candidates again, in their old place.
func (st *queueState) setClaimed(children []string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	next := make(map[string]bool, len(children))
	for _, c := range children {
		next[c] = true
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
	delete(st.claimed, r.key)
	st.broadcastLocked()
	st.mu.Unlock()
	if !taken {
		return 0, false
	}
	return st.finish(r.prio, r, outWon)
}
