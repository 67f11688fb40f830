package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// ClaimKind is the kind of a claim among a lease's holds (kit.Hold), named
// "<queue>/<claim id>".
const ClaimKind = "claim"

const claimKind = ClaimKind

// claimRec is a claim held by a lease of this sidecar: the lease's holding
// (kit.Holding) of kind "claim", named "<queue>/<claim id>".
type claimRec struct {
	id    string
	queue string
	item  itemRef
	st    *queueState
	lease *kit.Lease
	ep    *zookeeper.Epoch
	hold  kit.Hold
}

// HeldNodes is the item's claim marker: deleted by another hand, the claim is
// lost (the item may be claimed again).
func (rec *claimRec) HeldNodes() []string {
	return []string{rec.st.q.ipath(rec.queue, rec.item) + "/" + claimNode}
}

// Release ends the claim when its lease ends (revoked, expired, or its session
// lost): the markers are deleted, so the item is visible again.
func (rec *claimRec) Release(ctx context.Context) error {
	return rec.st.q.endClaim(ctx, rec.st, rec, "lease_ended")
}

// Claim claims the first available item for lease (at-least-once processing),
// waiting at most wait for one (0: look once); nil, nil when there is none (an
// implicit lease then ends; it cannot expire while it waits, and its TTL counts
// from the grant). The item stays in the queue, hidden from takes and
// claims, until the claim is acked (the item is deleted) or ends: released,
// lease revoked or expired, or the sidecar's session lost (a crashed sidecar's
// session expires on the server). Then the item is visible again in its old place.
func (q *Queues) Claim(ctx context.Context, lease *kit.Lease, name string, wait time.Duration) (*Claim, error) {
	if err := kit.CheckName("queue", name); err != nil {
		lease.EndImplicit()
		return nil, err
	}
	if lease.Err() != nil {
		return nil, fmt.Errorf("lease %q: %w", lease.ID, kit.ErrLeaseEnded)
	}
	st := q.state(name)
	var claim *Claim
	act := func(ctx context.Context, ep *zookeeper.Epoch, r itemRef) (outcome, error) {
		out, cl, err := q.claimOne(ctx, ep, st, lease, r)
		claim = cl
		return out, err
	}
	if lease.Implicit {
		// The claim's TTL counts from its grant, not from the start of the wait.
		unpin := lease.Pin()
		defer unpin()
	}
	found, err := q.poll(ctx, st, wait, lease.Epoch(), lease.Ending(), act)
	if err != nil || !found {
		lease.EndImplicit()
		return nil, err
	}
	return claim, nil
}

// claimOne claims item r for lease: both markers in one transaction, which fails
// as a whole when the item is gone or claimed already; then the claim is granted
// to the lease.
func (q *Queues) claimOne(ctx context.Context, ep *zookeeper.Epoch, st *queueState, lease *kit.Lease, r itemRef) (outcome, *Claim, error) {
	id := r.key + "." + kit.NewID()
	out, err := q.createMarkers(ctx, ep, st.name, r, id)
	if out != outClaimedHere {
		return out, nil, err
	}
	rec := &claimRec{id: id, queue: st.name, item: r, st: st, lease: lease, ep: ep, hold: kit.Hold{Kind: claimKind, Name: st.name + "/" + id}}
	return q.grantClaim(ctx, rec)
}

// Adopt re-creates lease's claim h from its saved claim marker after a restart
// that resumed the session (a kit.Adopter), wired as a new claim is: the marker
// and the claims/ index entry of the item the claim id names must both be the
// session's own and hold that claim id (so the item was hidden from every other
// taker all along). The claim is this sidecar's again under the same id (ack and
// release find it) and its item is skipped by this sidecar's takes and claims.
func (q *Queues) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	name, id, _ := strings.Cut(h.Name, "/")
	dot := strings.LastIndexByte(id, '.') // a claim id is "<item id>.<random>"
	if kit.CheckName("queue", name) != nil || dot < 0 {
		return nil, fmt.Errorf("claim %q: not <queue>/<claim id>", h.Name)
	}
	r, ok := parseItemID(id[:dot])
	if !ok {
		return nil, fmt.Errorf("claim %q: %q is not an item id", h.Name, id[:dot])
	}
	marker := q.ipath(name, r) + "/" + claimNode
	if len(h.Nodes) != 1 || h.Nodes[0] != marker {
		return nil, fmt.Errorf("claim %q: saved nodes %v are not its marker %s", h.Name, h.Nodes, marker)
	}
	for _, p := range []string{marker, q.cpath(name) + "/" + r.key} {
		data, _, err := kit.OwnedNode(ctx, lease, p)
		if err != nil {
			return nil, fmt.Errorf("claim %q: %w", h.Name, err)
		}
		if string(data) != id {
			return nil, fmt.Errorf("claim %q: node %s holds claim %q", h.Name, p, data)
		}
	}
	st := q.state(name)
	rec := &claimRec{id: id, queue: name, item: r, st: st, lease: lease, ep: lease.Epoch(), hold: kit.Hold{Kind: claimKind, Name: h.Name}}
	q.mu.Lock()
	q.claims[id] = rec
	q.mu.Unlock()
	q.metrics.claims.Inc()
	st.finish(r.prio, r, outClaimedHere)
	return rec, nil
}

// createMarkers creates r's claim markers with data id. After a lost answer it
// adopts the marker when it holds id.
func (q *Queues) createMarkers(ctx context.Context, ep *zookeeper.Epoch, name string, r itemRef, id string) (outcome, error) {
	marker := q.ipath(name, r) + "/" + claimNode
	index := q.cpath(name) + "/" + r.key
	data := []byte(id)
	for {
		res, err := ep.Multi(ctx,
			zookeeper.CreateOp{Path: marker, Data: data, Mode: zookeeper.Ephemeral},
			zookeeper.CreateOp{Path: index, Data: data, Mode: zookeeper.Ephemeral},
		)
		if err == nil {
			return outClaimedHere, nil
		}
		if errors.Is(err, kit.ErrUnavailable) && ctx.Err() == nil {
			// The answer may be lost with the connection: is the claim ours?
			out, again, err := q.adoptMarker(ctx, ep, marker, id)
			if !again {
				return out, err
			}
			continue
		}
		op := zookeeper.FailedOp(res, err)
		switch {
		case op == 0 && errors.Is(err, zookeeper.ErrNoNode):
			q.metrics.conflicts.Inc()
			return outGone, nil
		case errors.Is(err, zookeeper.ErrNodeExists):
			q.metrics.conflicts.Inc()
			return outClaimedElsewhere, nil
		case op == 1 && errors.Is(err, zookeeper.ErrNoNode):
			if err := ep.EnsureContainer(ctx, q.cpath(name)); err != nil {
				return outUnknown, err
			}
		default:
			return outUnknown, fmt.Errorf("claim in queue %q: %w", name, err)
		}
	}
}

// adoptMarker settles a claim transaction whose answer was lost, once the same
// session is back: the claim went through when the marker holds id; again when
// there is no marker (the transaction did not happen: send it again).
func (q *Queues) adoptMarker(ctx context.Context, ep *zookeeper.Epoch, marker, id string) (out outcome, again bool, err error) {
	if err := ep.WaitConnected(ctx); err != nil {
		return outUnknown, false, err
	}
	got, _, err := ep.Get(ctx, marker)
	switch {
	case err == nil && string(got) == id:
		return outClaimedHere, false, nil // the claim went through
	case err == nil:
		return outClaimedElsewhere, false, nil
	case errors.Is(err, zookeeper.ErrNoNode):
		return outUnknown, true, nil
	default:
		return outUnknown, false, err
	}
}

// grantClaim reads the claimed item and grants the claim to its lease (the kit's
// hold protocol). When either fails, the claim is undone: the item is visible
// again.
func (q *Queues) grantClaim(ctx context.Context, rec *claimRec) (outcome, *Claim, error) {
	ep := rec.ep
	payload, _, err := ep.Get(ctx, q.ipath(rec.queue, rec.item))
	if err == nil {
		// Known before the grant, so that the lease's end, whenever it comes,
		// finds the claim to release.
		q.mu.Lock()
		q.claims[rec.id] = rec
		q.mu.Unlock()
		q.metrics.claims.Inc()
		_, _, err = kit.Acquire(ctx, rec.lease, rec.hold, func(context.Context, *zookeeper.Epoch) (*claimRec, error) {
			return rec, nil // made above: the grant is all that is left
		})
	}
	if err != nil {
		cctx, cancel := context.WithTimeout(context.Background(), q.s.OpTimeout())
		defer cancel()
		if _, known := q.lookup(rec.id); known {
			_ = q.endClaim(cctx, rec.st, rec, "released")
		} else {
			_ = ep.Settle(cctx, func(ctx context.Context) error { return q.dropMarkers(ctx, ep, rec) })
		}
		return outUnknown, nil, err
	}
	ct, data := decodeOrWhole(payload)
	return outClaimedHere, &Claim{ID: rec.id, Lease: rec.lease.ID, Item: Item{ID: rec.item.key, Priority: rec.item.prio, ContentType: ct, Data: data}}, nil
}

func (q *Queues) lookup(id string) (*claimRec, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	rec, ok := q.claims[id]
	return rec, ok
}

// dropMarkers deletes both claim markers of rec's item in one transaction.
// When one of them is gone already (deleted by another hand: the claim was
// lost), the transaction deletes nothing, and the other is deleted on its
// own if it is still rec's (it holds rec's claim id): left standing, a
// claims/ entry would hide the item from every take and claim for as long
// as the session lives.
func (q *Queues) dropMarkers(ctx context.Context, ep *zookeeper.Epoch, rec *claimRec) error {
	index, marker := q.cpath(rec.queue)+"/"+rec.item.key, q.ipath(rec.queue, rec.item)+"/"+claimNode
	_, err := ep.Multi(ctx,
		zookeeper.DeleteOp{Path: index, Version: -1},
		zookeeper.DeleteOp{Path: marker, Version: -1},
	)
	if !errors.Is(err, zookeeper.ErrNoNode) {
		return err
	}
	for _, p := range []string{index, marker} {
		data, st, err := ep.Get(ctx, p)
		if errors.Is(err, zookeeper.ErrNoNode) || err == nil && string(data) != rec.id {
			continue // gone, or another claim's
		}
		if err != nil {
			return err
		}
		err = ep.Delete(ctx, p, st.Version)
		if err != nil && !errors.Is(err, zookeeper.ErrNoNode) && !errors.Is(err, zookeeper.ErrBadVersion) {
			return err
		}
	}
	return nil
}

// endClaim releases a claim (the item is visible again) and forgets it. Through
// a suspension the markers' delete goes on after ctx (Epoch.Settle).
func (q *Queues) endClaim(ctx context.Context, st *queueState, rec *claimRec, reason string) error {
	err := rec.ep.Settle(ctx, func(ctx context.Context) error { return q.dropMarkers(ctx, rec.ep, rec) })
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
		ctx, cancel := context.WithTimeout(context.Background(), q.s.OpTimeout())
		q.dropBucket(ctx, rec.ep, rec.queue, rec.item.prio, b)
		cancel()
	}
}

// claimFor finds a claim of this sidecar on queue name.
func (q *Queues) claimFor(name, id string) (*claimRec, error) {
	if err := kit.CheckName("queue", name); err != nil {
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
func (q *Queues) ClaimLease(name, id string) (*kit.Lease, error) {
	rec, err := q.claimFor(name, id)
	if err != nil {
		return nil, err
	}
	return rec.lease, nil
}

// Ack deletes the claimed item: it is never delivered again. It fails with
// ErrClaimNotFound when the claim is not held on this sidecar (acked or released
// already, or ended with its lease). When the delete fails otherwise, the claim
// is released (the item is visible again) and the error returned. An implicit
// lease ends with it.
func (q *Queues) Ack(ctx context.Context, name, id string) error {
	rec, err := q.claimFor(name, id)
	if err != nil {
		return err
	}
	held, err := kit.Take[*claimRec](rec.lease, rec.hold)
	if err != nil {
		return fmt.Errorf("claim %q in queue %q: %w", id, name, ErrClaimNotFound)
	}
	defer rec.lease.Released()
	st := q.state(name)
	err = q.deleteClaimed(ctx, rec)
	switch {
	case err == nil:
		q.metrics.taken.WithLabelValues("ack").Inc()
		q.forget(st, rec, "acked", true)
		return nil
	case errors.Is(err, zookeeper.ErrNoNode), errors.Is(err, kit.ErrSessionLost):
		// The markers went with the session: the claim had ended.
		q.forget(st, rec, "lease_ended", false)
		return fmt.Errorf("claim %q in queue %q: %w", id, name, ErrClaimNotFound)
	default:
		// Not acked: give the item back rather than leave it hidden.
		cctx, cancel := context.WithTimeout(context.Background(), q.s.OpTimeout())
		_ = held.Release(cctx)
		cancel()
		return err
	}
}

// deleteClaimed deletes a claimed item with its markers in one transaction. After
// a lost answer it waits for the same session and sends it again while the item
// is there; an item found gone was deleted by it (nil).
func (q *Queues) deleteClaimed(ctx context.Context, rec *claimRec) error {
	ep := rec.ep
	ipath := q.ipath(rec.queue, rec.item)
	for {
		_, err := ep.Multi(ctx,
			zookeeper.DeleteOp{Path: q.cpath(rec.queue) + "/" + rec.item.key, Version: -1},
			zookeeper.DeleteOp{Path: ipath + "/" + claimNode, Version: -1},
			zookeeper.DeleteOp{Path: ipath, Version: -1},
		)
		if !errors.Is(err, kit.ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		// The answer may be lost with the connection: is the item still there?
		if err := ep.WaitConnected(ctx); err != nil {
			return err
		}
		exists, _, err := ep.Exists(ctx, ipath)
		if err != nil || !exists {
			return err
		}
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
	// The holding's Release would do the same; this one counts the right reason.
	if _, err := kit.Take[*claimRec](rec.lease, rec.hold); err != nil {
		return fmt.Errorf("claim %q in queue %q: %w", id, name, ErrClaimNotFound)
	}
	st := q.state(name)
	err = rec.ep.Settle(ctx, func(ctx context.Context) error { return q.dropMarkers(ctx, rec.ep, rec) })
	q.forget(st, rec, "released", false)
	rec.lease.Released()
	return err
}
