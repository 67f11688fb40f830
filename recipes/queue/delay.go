package queue

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// delayRetry is how soon a sidecar tries again to move due items when its
// last attempt failed (the session away, say) and no take is there to do it.
const delayRetry = time.Second

// EnqueueDelayed stores payload as Enqueue does, to be taken no earlier than
// due: until then it waits apart, under delayed/, where no take or claim sees
// it; once due, a sidecar moves it to the end of priority prio (see the package
// documentation for who moves it, when, and in what order). A due time not in
// the future enqueues at once, as Enqueue, and answers the item's id. Otherwise
// the answer is the delayed item's id, "delayed.<node name>": the item is taken
// under a new id, "p<NN>.b….i<H>-<token>-<seq>", whose token (the part between
// the first and last dash) is the delayed id's token, the fourth dash-separated
// part. A due time more than MaxDelay ahead is ErrInvalidArgument. When ctx
// ends before the item was sent, nothing is stored; ErrUnavailable means it may
// or may not have been stored.
func (q *Queues) EnqueueDelayed(ctx context.Context, name string, prio int, contentType string, payload []byte, due time.Time) (string, error) {
	if !due.After(time.Now()) {
		return q.Enqueue(ctx, name, prio, contentType, payload)
	}
	contentType, err := checkEnqueue(name, prio, contentType)
	if err != nil {
		return "", err
	}
	if ahead := time.Until(due); ahead > MaxDelay {
		return "", fmt.Errorf("due in %s: at most %s ahead: %w", ahead.Round(time.Second), MaxDelay, kit.ErrInvalidArgument)
	}
	if _, err := q.s.Await(ctx); err != nil {
		return "", err
	}
	data, h := encodeItem(contentType, payload)
	token := newToken()
	node, err := q.createDelayed(ctx, name, delayedPrefix(due, prio, h, token), token, data)
	if err != nil {
		return "", err
	}
	d, ok := parseDelayedName(node)
	if !ok {
		return "", fmt.Errorf("queue %q: unexpected node %q", name, node)
	}
	q.metrics.delayedEnqueued.Inc()
	st := q.state(name)
	st.mu.Lock()
	st.delayedDirty = true // this sidecar watches delayed/ from now on, and moves it when due
	st.kickLocked()
	st.mu.Unlock()
	return d.id(), nil
}

// checkEnqueue checks an enqueue's arguments and returns the content type to
// store.
func checkEnqueue(name string, prio int, contentType string) (string, error) {
	if err := kit.CheckName("queue", name); err != nil {
		return "", err
	}
	if prio < 0 || prio > MaxPriority {
		return "", fmt.Errorf("priority %d: must be between 0 and %d: %w", prio, MaxPriority, kit.ErrInvalidArgument)
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	if len(contentType) > maxContentType {
		return "", fmt.Errorf("content type of %d bytes: at most %d: %w", len(contentType), maxContentType, kit.ErrInvalidArgument)
	}
	return contentType, nil
}

// createDelayed creates the delayed item's node (persistent sequential) under
// delayed/ (a container, made when missing) and returns its name. A create
// whose answer is lost is looked for by its token once connected, as Enqueue
// does.
func (q *Queues) createDelayed(ctx context.Context, name, prefix, token string, data []byte) (string, error) {
	dir := q.dpath(name)
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*q.s.OpTimeout())
	defer cancel()
	for range enqueueAttempts {
		if err := ctx.Err(); err != nil {
			return "", err // nothing of this attempt was sent
		}
		changed := q.s.Changed()
		ep, err := q.s.Await(wctx)
		if err != nil {
			if errors.Is(err, kit.ErrClosed) || !waitChange(wctx, changed) {
				return "", err
			}
			continue
		}
		p, err := ep.Create(wctx, dir+"/"+prefix, data, zookeeper.Sequential)
		switch {
		case err == nil:
			return path.Base(p), nil
		case errors.Is(err, zookeeper.ErrNoNode):
			err := ep.CreateIn(wctx, dir, nil, zookeeper.Container)
			if err != nil && !errors.Is(err, zookeeper.ErrNodeExists) && !errors.Is(err, kit.ErrUnavailable) {
				return "", fmt.Errorf("queue %q: %w", name, err)
			}
		case errors.Is(err, kit.ErrUnavailable), errors.Is(err, kit.ErrSessionLost):
			node, rec := q.findDelayed(wctx, dir, token)
			switch rec {
			case recovered:
				return node, nil
			case unknown:
				return "", fmt.Errorf("queue %q: %w", name, kit.ErrUnavailable)
			}
		default:
			return "", fmt.Errorf("enqueue to %q: %w", name, err)
		}
	}
	return "", fmt.Errorf("enqueue to %q: gave up after %d attempts: %w", name, enqueueAttempts, kit.ErrUnavailable)
}

// findDelayed looks for the delayed item of token under dir once connected.
func (q *Queues) findDelayed(ctx context.Context, dir, token string) (string, recovery) {
	for ctx.Err() == nil {
		changed := q.s.Changed()
		ep, err := q.s.Await(ctx)
		if err != nil {
			if errors.Is(err, kit.ErrClosed) || !waitChange(ctx, changed) {
				return "", unknown
			}
			continue
		}
		names, _, err := ep.Children(ctx, dir)
		switch {
		case errors.Is(err, kit.ErrUnavailable) || errors.Is(err, kit.ErrSessionLost):
			continue
		case errors.Is(err, zookeeper.ErrNoNode):
			return "", notWritten
		case err != nil:
			return "", unknown
		}
		for _, n := range names {
			if d, ok := parseDelayedName(n); ok && d.token == token {
				return n, recovered
			}
		}
		return "", notWritten
	}
	return "", unknown
}

// moveDue moves the queue's due delayed items into their priorities before a
// take or claim looks at the queue. It costs nothing when this sidecar's view
// of delayed/ (kept by a watch) has nothing due.
func (st *queueState) moveDue(ctx context.Context, ep *zookeeper.Epoch) error {
	st.mu.Lock()
	need := !st.delayedKnown || st.delayedDirty || (len(st.delayed) > 0 && st.delayed[0].due <= time.Now().UnixMilli())
	st.mu.Unlock()
	if !need {
		return nil
	}
	return st.refreshDelayed(ctx, ep)
}

// refreshDelayed lists delayed/ when it may have changed (leaving a watch on
// it), moves the items due by now in due order, and sets the timer for the
// next one. One refresh of a queue runs at a time.
func (st *queueState) refreshDelayed(ctx context.Context, ep *zookeeper.Epoch) error {
	select {
	case st.dsem <- struct{}{}:
		defer func() { <-st.dsem }()
	case <-ctx.Done():
		return ctx.Err()
	}
	st.mu.Lock()
	relist := !st.delayedKnown || st.delayedDirty
	st.delayedDirty = false
	st.mu.Unlock()
	if relist {
		names, err := st.listDelayed(ctx, ep)
		if err != nil {
			st.mu.Lock()
			st.delayedDirty = true
			st.mu.Unlock()
			return err
		}
		refs := make([]delayedRef, 0, len(names))
		for _, n := range names {
			if d, ok := parseDelayedName(n); ok {
				refs = append(refs, d)
			}
		}
		slices.SortFunc(refs, func(a, b delayedRef) int {
			if a.before(b) {
				return -1
			}
			if b.before(a) {
				return 1
			}
			return 0
		})
		st.mu.Lock()
		st.setDelayedLocked(refs)
		st.delayedKnown = true
		st.mu.Unlock()
	}
	for {
		st.mu.Lock()
		if len(st.delayed) == 0 || st.delayed[0].due > time.Now().UnixMilli() {
			st.armTimerLocked()
			st.mu.Unlock()
			return nil
		}
		d := st.delayed[0]
		st.mu.Unlock()
		if err := st.q.moveOne(ctx, ep, st, d); err != nil {
			st.mu.Lock()
			st.delayedDirty = true // look again: it may have moved meanwhile
			st.armTimerLocked()
			st.mu.Unlock()
			return err
		}
		st.mu.Lock()
		st.setDelayedLocked(slices.DeleteFunc(st.delayed, func(o delayedRef) bool { return o.name == d.name }))
		st.mu.Unlock()
	}
}

// setDelayedLocked replaces the cached delayed items, keeping the gauge true.
func (st *queueState) setDelayedLocked(refs []delayedRef) {
	st.q.metrics.delayed.Add(float64(len(refs) - len(st.delayed)))
	st.delayed = refs
}

// listDelayed lists delayed/ with a children watch (an exists watch when it is
// missing), whose firing makes this sidecar look again, at once.
func (st *queueState) listDelayed(ctx context.Context, ep *zookeeper.Epoch) ([]string, error) {
	dir := st.q.dpath(st.name)
	fired := func() {
		st.delayedDirty = true
		st.kickLocked()
	}
	for range 2 {
		names, err := st.listArmed(ctx, ep, dir, fired)
		if !errors.Is(err, zookeeper.ErrNoNode) {
			return names, err
		}
		key := "?" + dir
		if !st.reserveWatch(key) {
			return nil, nil // watched already: it tells when delayed/ is made
		}
		exists, _, watch, err := ep.ExistsW(ctx, dir)
		if err != nil {
			st.unreserveWatch(key)
			return nil, err
		}
		st.watchArmed(key, watch, fired)
		if !exists {
			return nil, nil
		}
	}
	return nil, nil
}

// moveOne moves due delayed item d to the end of its priority: one transaction
// deletes its node and creates the item (through the priority's enqueue
// batcher), so whichever sidecar's delete succeeds moves it, once.
func (q *Queues) moveOne(ctx context.Context, ep *zookeeper.Epoch, st *queueState, d delayedRef) error {
	node := q.dpath(st.name) + "/" + d.name
	data, _, err := ep.Get(ctx, node)
	switch {
	case errors.Is(err, zookeeper.ErrNoNode):
		return nil // moved by another sidecar
	case err != nil:
		return fmt.Errorf("queue %q: %w", st.name, err)
	}
	req := &enqReq{data: data, prefix: itemPrefix(d.header, d.token), token: d.token, del: node, done: make(chan struct{})}
	st.batcher(d.prio).gc.Submit(req)
	<-req.done // calls are bounded: answered soon
	switch {
	case errors.Is(req.err, errMovedElsewhere):
		return nil
	case req.err != nil:
		return req.err
	}
	q.metrics.delayedMoved.Inc()
	st.enqueued(d.prio)
	return nil
}

// armTimerLocked sets the timer for the first delayed item not yet due (none:
// stopped). When it fires, waiting takes look again and a refresh moves it.
func (st *queueState) armTimerLocked() {
	if st.delayedTimer != nil {
		st.delayedTimer.Stop()
	}
	now := time.Now().UnixMilli()
	for _, d := range st.delayed {
		if d.due > now {
			st.armAtLocked(time.Duration(d.due-now) * time.Millisecond)
			return
		}
	}
}

func (st *queueState) armAtLocked(after time.Duration) {
	if st.delayedStopped {
		return
	}
	if st.delayedTimer != nil {
		st.delayedTimer.Stop()
	}
	st.delayedTimer = time.AfterFunc(after, func() {
		st.mu.Lock()
		st.broadcastLocked()
		st.kickLocked()
		st.mu.Unlock()
	})
}

// kickLocked starts a refresh of delayed/ on a goroutine of the Session, unless
// one is about to start.
func (st *queueState) kickLocked() {
	if st.delayedKicked || st.delayedStopped {
		return
	}
	st.delayedKicked = true
	if !st.q.s.Go(st.backgroundRefresh) {
		st.delayedKicked = false // the Session is closing
	}
}

// backgroundRefresh moves due items with no take asking: on a delayed item's
// timer, or when delayed/ changed. When it fails it tries again after
// delayRetry.
func (st *queueState) backgroundRefresh() {
	st.mu.Lock()
	st.delayedKicked = false
	st.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 3*st.q.s.OpTimeout())
	defer cancel()
	ep, err := st.q.s.Await(ctx)
	if err == nil {
		err = st.refreshDelayed(ctx, ep)
	}
	if err != nil && !errors.Is(err, kit.ErrClosed) {
		st.mu.Lock()
		st.armAtLocked(delayRetry)
		st.mu.Unlock()
	}
}

// stopDelayed stops the timer for good (Queues.Close).
func (st *queueState) stopDelayed() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.delayedStopped = true
	if st.delayedTimer != nil {
		st.delayedTimer.Stop()
	}
}
