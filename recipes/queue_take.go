package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// takeOne reads item r and deletes it; the delete decides the one winner. An item
// with a child (its claim marker) cannot be deleted, so a claimed item is never
// taken. When the delete's answer is lost with the connection the item may be
// gone without anyone having it: take is at-most-once then (claims are the
// at-least-once way).
func (q *Queues) takeOne(ctx context.Context, ep *epoch, name string, r itemRef) (outcome, *Item, error) {
	p := q.ipath(name, r)
	var data []byte
	var st *zk.Stat
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		data, st, err = c.Get(p)
		return err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		q.metrics.conflicts.Inc()
		return outGone, nil, nil
	case err != nil:
		return outUnknown, nil, fmt.Errorf("queue %q: %w", name, err)
	case st.NumChildren > 0:
		q.metrics.conflicts.Inc()
		return outClaimedElsewhere, nil, nil
	}
	err = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(p, -1) })
	switch {
	case errors.Is(err, zk.ErrNoNode):
		q.metrics.conflicts.Inc()
		return outGone, nil, nil
	case errors.Is(err, zk.ErrNotEmpty):
		q.metrics.conflicts.Inc()
		return outClaimedElsewhere, nil, nil
	case err != nil:
		return outUnknown, nil, fmt.Errorf("queue %q: %w", name, err)
	}
	ct, payload, derr := decodeItem(data)
	if derr != nil {
		ct, payload = DefaultContentType, data // written by someone else: hand it over whole
	}
	q.metrics.taken.WithLabelValues("take").Inc()
	return outWon, &Item{ID: r.key, Priority: r.prio, ContentType: ct, Data: payload}, nil
}

// headBucket returns the lowest bucket of priority p above after (-1: any).
func (q *Queues) headBucket(ctx context.Context, ep *epoch, name string, p int, after int64) (int64, bool, error) {
	buckets, err := q.buckets(ctx, ep, name, p)
	if err != nil {
		return 0, false, err
	}
	for _, b := range buckets {
		if b > after {
			return b, true, nil
		}
	}
	return 0, false, nil
}

// buckets lists the buckets of priority p, ascending (none when p does not exist).
func (q *Queues) buckets(ctx context.Context, ep *epoch, name string, p int) ([]int64, error) {
	var children []string
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		children, _, err = c.Children(q.ppath(name, p))
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue %q: %w", name, err)
	}
	out := make([]int64, 0, len(children))
	for _, ch := range children {
		if b, ok := parseBucket(ch); ok {
			out = append(out, b)
		}
	}
	slices.Sort(out)
	return out, nil
}

// listBucket lists a bucket, setting a child watch when arm is set.
func (q *Queues) listBucket(ctx context.Context, ep *epoch, path string, arm bool) ([]string, *zk.Stat, <-chan zk.Event, error) {
	var names []string
	var st *zk.Stat
	var watch <-chan zk.Event
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		if arm {
			names, st, watch, err = c.ChildrenW(path)
		} else {
			names, st, err = c.Children(path)
		}
		return err
	})
	return names, st, watch, err
}

// dropBucket deletes bucket b of priority p if it is closed (version 1) and
// empty; anything else (an open tail, an item left, gone already) keeps it.
func (q *Queues) dropBucket(ctx context.Context, ep *epoch, name string, p int, b int64) {
	_ = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(q.bpath(name, p, b), 1) })
}
