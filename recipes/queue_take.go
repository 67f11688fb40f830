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
// taken.
//
// The delete goes in one transaction with an ephemeral receipt node of this
// attempt's own, <queue>/receipts/<item id>.<random>, so that a delete whose answer is lost with the
// connection is not a lost item: once the session is back, the receipt says
// whether this taker won. The receipt is deleted in the background after a win.
// Only when the session itself expires before the answer is the outcome unknown
// (then the item may be gone with no one having it; claims are the at-least-once
// way).
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
	// The receipt is this attempt's own (another taker's receipt for the same
	// item must never be mistaken for ours).
	receipt := q.rpath(name) + "/" + r.key + "." + newID()
	out, err := q.deleteWithReceipt(ctx, ep, name, p, receipt, st.Version)
	if out != outWon {
		if out != outUnknown {
			q.metrics.conflicts.Inc()
		}
		return out, nil, err
	}
	go q.dropReceipt(ep, receipt)
	ct, payload, derr := decodeItem(data)
	if derr != nil {
		ct, payload = DefaultContentType, data // written by someone else: hand it over whole
	}
	q.metrics.taken.WithLabelValues("take").Inc()
	return outWon, &Item{ID: r.key, Priority: r.prio, ContentType: ct, Data: payload}, nil
}

// deleteWithReceipt deletes item p (at version) together with creating the
// ephemeral receipt, and settles a lost answer through the receipt.
func (q *Queues) deleteWithReceipt(ctx context.Context, ep *epoch, name, p, receipt string, version int32) (outcome, error) {
	for attempt := 0; ; attempt++ {
		var res []zk.MultiResponse
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			res, err = c.Multi(
				&zk.DeleteRequest{Path: p, Version: version},
				&zk.CreateRequest{Path: receipt, Acl: openACL, Flags: zk.FlagEphemeral},
			)
			return err
		})
		opErr := func(i int) error {
			if i < len(res) {
				return res[i].Error
			}
			return nil
		}
		switch {
		case err == nil:
			return outWon, nil
		case errors.Is(opErr(0), zk.ErrNoNode), errors.Is(opErr(0), zk.ErrBadVersion):
			return outGone, nil
		case errors.Is(opErr(0), zk.ErrNotEmpty):
			return outClaimedElsewhere, nil
		case errors.Is(opErr(1), zk.ErrNoNode) && attempt == 0:
			// The receipts container was reclaimed (or never made): make it, retry.
			if err := ensureContainer(ctx, ep, q.rpath(name)); err != nil {
				return outUnknown, fmt.Errorf("queue %q: %w", name, err)
			}
			continue
		case errors.Is(err, ErrUnavailable) && !ep.isLost():
			return q.settle(ep, name, p, receipt)
		default:
			return outUnknown, fmt.Errorf("queue %q: %w", name, err)
		}
	}
}

// settle decides a take whose answer was lost: it waits (bounded) for the same
// session to come back and reads the receipt.
func (q *Queues) settle(ep *epoch, name, p, receipt string) (outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ep.sessionTimeout()+q.s.cfg.OpTimeout)
	defer cancel()
	for {
		if err := waitConnected(ctx, ep); err != nil {
			return outUnknown, fmt.Errorf("queue %q: take's answer lost and the session with it: %w", name, err)
		}
		var won, exists bool
		err := parallel(
			func() error {
				return ep.call(ctx, func(c *zk.Conn) error {
					var err error
					won, _, err = c.Exists(receipt)
					return err
				})
			},
			func() error {
				return ep.call(ctx, func(c *zk.Conn) error {
					var err error
					exists, _, err = c.Exists(p)
					return err
				})
			})
		switch {
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil && !ep.isLost():
			continue
		case err != nil:
			return outUnknown, fmt.Errorf("queue %q: %w", name, err)
		case won:
			return outWon, nil
		case exists:
			return outUnknown, nil // the transaction did not happen: the item stays
		default:
			return outGone, nil // another taker had it
		}
	}
}

// dropReceipt deletes a settled take's receipt (best effort: it is ephemeral
// and goes with the session in any case).
func (q *Queues) dropReceipt(ep *epoch, receipt string) {
	ctx, cancel := context.WithTimeout(context.Background(), q.s.cfg.OpTimeout)
	defer cancel()
	_ = ep.call(ctx, func(c *zk.Conn) error { return c.Delete(receipt, -1) })
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
