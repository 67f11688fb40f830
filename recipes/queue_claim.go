package recipes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"
)

const claimKind = "claim"

// claimRec is a claim held by a lease of this sidecar.
type claimRec struct {
	id    string
	queue string
	item  itemRef
	lease *Lease
	ep    *epoch
	hold  Hold
}

// Claim claims the first available item for lease (at-least-once processing),
// waiting at most wait for one (0: look once); nil, nil when there is none (an
// implicit lease then ends; it cannot expire while it waits, and its TTL counts
// from the grant). The item stays in the queue, hidden from takes and
// claims, until the claim is acked (the item is deleted) or ends: released,
// lease revoked or expired, or the sidecar's session lost (a crashed sidecar's
// session expires on the server). Then the item is visible again in its old place.
func (q *Queues) Claim(ctx context.Context, lease *Lease, name string, wait time.Duration) (*Claim, error) {
	if err := CheckName("queue", name); err != nil {
		endImplicit(lease)
		return nil, err
	}
	if lease.Err() != nil {
		return nil, fmt.Errorf("lease %q: %w", lease.ID, ErrLeaseEnded)
	}
	st := q.state(name)
	var claim *Claim
	act := func(ctx context.Context, ep *epoch, r itemRef) (outcome, error) {
		out, cl, err := q.claimOne(ctx, ep, st, lease, r)
		claim = cl
		return out, err
	}
	if lease.Implicit {
		// The claim's TTL counts from its grant, not from the start of the wait.
		unpin := lease.Pin()
		defer unpin()
	}
	found, err := q.poll(ctx, st, wait, lease.ep, lease.Ending(), act)
	if err != nil || !found {
		endImplicit(lease)
		return nil, err
	}
	return claim, nil
}

// claimOne claims item r for lease: both markers in one transaction, which fails
// as a whole when the item is gone or claimed already.
func (q *Queues) claimOne(ctx context.Context, ep *epoch, st *queueState, lease *Lease, r itemRef) (outcome, *Claim, error) {
	name := st.name
	id := r.key + "." + newID()
	ipath := q.ipath(name, r)
	marker := ipath + "/" + claimNode
	index := q.cpath(name) + "/" + r.key
	data := []byte(id)
attempt:
	for {
		var mr []zk.MultiResponse
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			mr, err = c.Multi(
				&zk.CreateRequest{Path: marker, Data: data, Acl: openACL, Flags: zk.FlagEphemeral},
				&zk.CreateRequest{Path: index, Data: data, Acl: openACL, Flags: zk.FlagEphemeral},
			)
			return err
		})
		if err == nil {
			break attempt
		}
		if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
			// The answer may be lost with the connection: is the claim ours?
			if err := waitConnected(ctx, ep); err != nil {
				return outUnknown, nil, err
			}
			var got []byte
			gerr := ep.call(ctx, func(c *zk.Conn) error {
				var err error
				got, _, err = c.Get(marker)
				return err
			})
			switch {
			case gerr == nil && string(got) == id:
				break attempt // the claim went through
			case gerr == nil:
				return outClaimedElsewhere, nil, nil
			case errors.Is(gerr, zk.ErrNoNode):
				continue
			default:
				return outUnknown, nil, gerr
			}
		}
		op := failedOp(mr, err)
		switch {
		case op == 0 && errors.Is(err, zk.ErrNoNode):
			q.metrics.conflicts.Inc()
			return outGone, nil, nil
		case errors.Is(err, zk.ErrNodeExists):
			q.metrics.conflicts.Inc()
			return outClaimedElsewhere, nil, nil
		case op == 1 && errors.Is(err, zk.ErrNoNode):
			if err := ensureContainer(ctx, ep, q.cpath(name)); err != nil {
				return outUnknown, nil, err
			}
			continue
		default:
			return outUnknown, nil, fmt.Errorf("claim in queue %q: %w", name, err)
		}
	}
	rec := &claimRec{id: id, queue: name, item: r, lease: lease, ep: ep, hold: Hold{Kind: claimKind, Name: name + "/" + id}}
	var payload []byte
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		payload, _, err = c.Get(ipath)
		return err
	})
	if err == nil {
		q.mu.Lock()
		q.claims[id] = rec
		q.mu.Unlock()
		q.metrics.claims.Inc()
		err = lease.grant(rec.hold, rec, func(ctx context.Context) error { return q.endClaim(ctx, st, rec, "lease_ended") })
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), q.s.cfg.OpTimeout)
		defer cancel()
		if _, known := q.lookup(id); known {
			_ = q.endClaim(cctx, st, rec, "released")
		} else {
			_ = settle(cctx, ep, func(ctx context.Context) error { return q.dropMarkers(ctx, ep, name, r) })
		}
		return outUnknown, nil, err
	}
	ct, data2, derr := decodeItem(payload)
	if derr != nil {
		ct, data2 = DefaultContentType, payload
	}
	return outClaimedHere, &Claim{ID: id, Lease: lease.ID, Item: Item{ID: r.key, Priority: r.prio, ContentType: ct, Data: data2}}, nil
}

func (q *Queues) lookup(id string) (*claimRec, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rec, ok := q.claims[id]
	return rec, ok
}

// dropMarkers deletes both claim markers of r in one transaction.
func (q *Queues) dropMarkers(ctx context.Context, ep *epoch, name string, r itemRef) error {
	ipath := q.ipath(name, r)
	err := ep.call(ctx, func(c *zk.Conn) error {
		_, err := c.Multi(
			&zk.DeleteRequest{Path: q.cpath(name) + "/" + r.key, Version: -1},
			&zk.DeleteRequest{Path: ipath + "/" + claimNode, Version: -1},
		)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil // ended already
	}
	return err
}

// endClaim releases a claim (the item is visible again) and forgets it.
func (q *Queues) endClaim(ctx context.Context, st *queueState, rec *claimRec, reason string) error {
	err := settle(ctx, rec.ep, func(ctx context.Context) error { return q.dropMarkers(ctx, rec.ep, rec.queue, rec.item) })
	q.forget(st, rec, reason, false)
	return err
}

// forget drops a claim of this sidecar from memory.
func (q *Queues) forget(st *queueState, rec *claimRec, reason string, taken bool) {
	q.mu.Lock()
	_, known := q.claims[rec.id]
	delete(q.claims, rec.id)
	q.mu.Unlock()
	if !known {
		return
	}
	q.metrics.claims.Dec()
	q.metrics.claimEnds.WithLabelValues(reason).Inc()
	if b, drop := st.unclaim(rec.item, taken); drop {
		ctx, cancel := context.WithTimeout(context.Background(), q.s.cfg.OpTimeout)
		q.dropBucket(ctx, rec.ep, rec.queue, rec.item.prio, b)
		cancel()
	}
}

// claimFor finds a claim of this sidecar on queue name.
func (q *Queues) claimFor(name, id string) (*claimRec, error) {
	if err := CheckName("queue", name); err != nil {
		return nil, err
	}
	rec, ok := q.lookup(id)
	if !ok || rec.queue != name || !strings.HasPrefix(id, rec.item.key+".") {
		return nil, fmt.Errorf("claim %q in queue %q: %w", id, name, ErrClaimNotFound)
	}
	return rec, nil
}

// ClaimLease returns the lease that holds claim id of queue name on this sidecar,
// or ErrClaimNotFound.
func (q *Queues) ClaimLease(name, id string) (*Lease, error) {
	rec, err := q.claimFor(name, id)
	if err != nil {
		return nil, err
	}
	return rec.lease, nil
}

// Ack deletes the claimed item: it is never delivered again. It fails with
// ErrClaimNotFound when the claim is not held on this sidecar (acked or released
// already, or ended with its lease). An implicit lease ends with it.
func (q *Queues) Ack(ctx context.Context, name, id string) error {
	rec, err := q.claimFor(name, id)
	if err != nil {
		return err
	}
	held, err := rec.lease.take(rec.hold)
	if err != nil {
		return fmt.Errorf("claim %q in queue %q: %w", id, name, ErrClaimNotFound)
	}
	defer rec.lease.released()
	st := q.state(name)
	ep := rec.ep
	ipath := q.ipath(name, rec.item)
	for {
		err = ep.call(ctx, func(c *zk.Conn) error {
			_, err := c.Multi(
				&zk.DeleteRequest{Path: q.cpath(name) + "/" + rec.item.key, Version: -1},
				&zk.DeleteRequest{Path: ipath + "/" + claimNode, Version: -1},
				&zk.DeleteRequest{Path: ipath, Version: -1},
			)
			return err
		})
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			break
		}
		// The answer may be lost with the connection: is the item still there?
		if err = waitConnected(ctx, ep); err != nil {
			break
		}
		var exists bool
		if err = ep.call(ctx, func(c *zk.Conn) error {
			var err error
			exists, _, err = c.Exists(ipath)
			return err
		}); err != nil || !exists {
			break
		}
	}
	switch {
	case err == nil:
		q.metrics.taken.WithLabelValues("ack").Inc()
		q.forget(st, rec, "acked", true)
		return nil
	case errors.Is(err, zk.ErrNoNode), errors.Is(err, ErrSessionLost):
		// The markers went with the session: the claim had ended.
		q.forget(st, rec, "lease_ended", false)
		return fmt.Errorf("claim %q in queue %q: %w", id, name, ErrClaimNotFound)
	default:
		// Not acked: give the item back rather than leave it hidden.
		cctx, cancel := context.WithTimeout(context.Background(), q.s.cfg.OpTimeout)
		_ = held.release(cctx)
		cancel()
		return err
	}
}

// Release ends the claim: the item is visible again in its old place. It fails
// with ErrClaimNotFound when the claim is not held on this sidecar. An implicit
// lease ends with it.
func (q *Queues) Release(ctx context.Context, name, id string) error {
	rec, err := q.claimFor(name, id)
	if err != nil {
		return err
	}
	// The hold's release would do the same; this one counts the right reason.
	if _, err := rec.lease.take(rec.hold); err != nil {
		return fmt.Errorf("claim %q in queue %q: %w", id, name, ErrClaimNotFound)
	}
	st := q.state(name)
	err = settle(ctx, rec.ep, func(ctx context.Context) error { return q.dropMarkers(ctx, rec.ep, name, rec.item) })
	q.forget(st, rec, "released", false)
	rec.lease.released()
	return err
}
