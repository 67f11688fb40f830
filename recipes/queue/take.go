package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// takeOne reads item r and deletes it; the delete decides the one winner. An item
// with a child (its claim marker) cannot be deleted, so a claimed item is never
// taken.
//
// The delete goes in one transaction with an ephemeral receipt node of this
// attempt's own, <queue>/receipts/<item id>.<random>, so that a delete whose
// answer is lost with the connection is not a lost item: once the session is
// back, the receipt says whether this taker won. The receipt is deleted on a
// goroutine of the Session after a win. Only when the same session is not back
// within a session timeout (it expired, or is still away) is the outcome unknown:
// then the item may be gone with no one having it (claims are the at-least-once
// way).
func (q *Queues) takeOne(ctx context.Context, ep *zookeeper.Epoch, name string, r itemRef) (outcome, *Item, error) {
	p := q.ipath(name, r)
	data, st, err := ep.Get(ctx, p)
	switch {
	case errors.Is(err, zookeeper.ErrNoNode):
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
	receipt := q.rpath(name) + "/" + r.key + "." + kit.NewID()
	out, err := q.deleteWithReceipt(ctx, ep, name, p, receipt, st.Version)
	if out != outWon {
		if out != outUnknown {
			q.metrics.conflicts.Inc()
		}
		return out, nil, err
	}
	q.s.Go(func() { q.dropReceipt(ep, receipt) }) // not once the Session is closing: the ephemeral receipt goes with it
	ct, payload := decodeOrWhole(data)
	q.metrics.taken.WithLabelValues("take").Inc()
	return outWon, &Item{ID: r.key, Priority: r.prio, ContentType: ct, Data: payload}, nil
}

// deleteWithReceipt deletes item p (at version) together with creating the
// ephemeral receipt, and settles a lost answer through the receipt.
func (q *Queues) deleteWithReceipt(ctx context.Context, ep *zookeeper.Epoch, name, p, receipt string, version int32) (outcome, error) {
	for attempt := 0; ; attempt++ {
		res, err := ep.Multi(ctx,
			zookeeper.DeleteOp{Path: p, Version: version},
			zookeeper.CreateOp{Path: receipt, Mode: zookeeper.Ephemeral},
		)
		opErr := func(i int) error {
			if i < len(res) {
				return res[i].Err
			}
			return nil
		}
		switch {
		case err == nil:
			return outWon, nil
		case errors.Is(opErr(0), zookeeper.ErrNoNode), errors.Is(opErr(0), zookeeper.ErrBadVersion):
			return outGone, nil
		case errors.Is(opErr(0), zookeeper.ErrNotEmpty):
			return outClaimedElsewhere, nil
		case errors.Is(opErr(1), zookeeper.ErrNoNode) && attempt == 0:
			// The receipts container was reclaimed (or never made): make it, retry.
			if err := ep.EnsureContainer(ctx, q.rpath(name)); err != nil {
				return outUnknown, fmt.Errorf("queue %q: %w", name, err)
			}
			continue
		case errors.Is(err, kit.ErrUnavailable) && !ep.IsLost():
			return q.awaitReceipt(ep, name, p, receipt)
		default:
			return outUnknown, fmt.Errorf("queue %q: %w", name, err)
		}
	}
}

// awaitReceipt decides a take whose answer was lost: it waits (at most a session
// timeout and a call's) for the same session to come back and reads the receipt.
func (q *Queues) awaitReceipt(ep *zookeeper.Epoch, name, p, receipt string) (outcome, error) {
	ctx, cancel := context.WithTimeout(context.Background(), ep.SessionTimeout()+q.s.OpTimeout())
	defer cancel()
	for {
		if err := ep.WaitConnected(ctx); err != nil {
			return outUnknown, fmt.Errorf("queue %q: take's answer lost, and the session not back in time to read its receipt: %w", name, err)
		}
		var won, exists bool
		err := zookeeper.Parallel(
			func() error {
				var err error
				won, _, err = ep.Exists(ctx, receipt)
				return err
			},
			func() error {
				var err error
				exists, _, err = ep.Exists(ctx, p)
				return err
			})
		switch {
		case errors.Is(err, kit.ErrUnavailable) && ctx.Err() == nil && !ep.IsLost():
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
func (q *Queues) dropReceipt(ep *zookeeper.Epoch, receipt string) {
	ctx, cancel := context.WithTimeout(context.Background(), q.s.OpTimeout())
	defer cancel()
	_ = ep.Delete(ctx, receipt, -1)
}

// headBucket returns the lowest bucket of priority p above after (-1: any).
func (q *Queues) headBucket(ctx context.Context, ep *zookeeper.Epoch, name string, p int, after int64) (int64, bool, error) {
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
func (q *Queues) buckets(ctx context.Context, ep *zookeeper.Epoch, name string, p int) ([]int64, error) {
	children, _, err := ep.Children(ctx, q.ppath(name, p))
	if errors.Is(err, zookeeper.ErrNoNode) {
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
func (q *Queues) listBucket(ctx context.Context, ep *zookeeper.Epoch, path string, arm bool) ([]string, *zookeeper.Stat, <-chan zookeeper.Event, error) {
	if arm {
		return ep.ChildrenW(ctx, path)
	}
	names, st, err := ep.Children(ctx, path)
	return names, st, nil, err
}

// dropBucket deletes bucket b of priority p if it is closed (version 1) and
// empty; anything else (an open tail, an item left, gone already) keeps it.
func (q *Queues) dropBucket(ctx context.Context, ep *zookeeper.Epoch, name string, p int, b int64) {
	_ = ep.Delete(ctx, q.bpath(name, p, b), 1)
}
