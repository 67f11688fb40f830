// Package queues is the HTTP side of the durable queues (recipes/queue):
// enqueue, take, claims and their ack or release, inspect, the first items,
// the list, and the queue's place in the picture.
package queues

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/api/specrules"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
)

// Queues serves the queue operations of openapi.yaml.
type Queues struct {
	s      *api.Server
	queues *queue.Queues
}

// Tokens are the queue's token kind.
func (*Queues) Tokens() []string { return []string{"queues"} }

// Setup makes the queues on env's session and describes them: their section
// "queue", the claim-not-found problem, how a successor adopts a claim, and
// the queues' Close.
func (h *Queues) Setup(env api.Env) api.Descriptor {
	h.s, h.queues = env.Server, queue.New(env.Session, env.Registerer)
	return api.Descriptor{
		Sections: []picture.Section{{Name: "queue", Token: "queues", Event: "queue", Dir: "queues", Field: "name",
			Follow: h.s.Inspected("queues", picture.BodyOf(h.read), parts.MatchString)}},
		Problems:  []api.ProblemRule{api.ProblemIs(queue.ErrClaimNotFound, http.StatusNotFound, "claim-not-found")},
		Adoptions: map[string]kit.Adoption{queue.ClaimKind: {Adopt: h.queues.Adopt}},
		Close:     h.queues.Close,
	}
}

// parts are the nodes under a queue whose children change its length, claimed
// or delayed count: its priorities, their buckets, its claims and delayed/.
var parts = regexp.MustCompile(`^(p[0-9]{2}(/b[0-9]{10})?|claims|delayed)$`)

// Enqueue stores the raw body, with its Content-Type, at the end of its priority.
func (h *Queues) Enqueue(ctx context.Context, req oapi.EnqueueRequestObject) (oapi.EnqueueResponseObject, error) {
	if err := kit.CheckName("queue", req.Name); err != nil {
		return nil, err
	}
	prio := 0
	if p := req.Params.Priority; p != nil {
		prio = *p
	}
	if prio < 0 || prio > queue.MaxPriority {
		return nil, api.InvalidParameter("priority=%d: must be between 0 and %d", prio, queue.MaxPriority)
	}
	if len(req.ContentType) > 255 {
		return nil, api.InvalidParameter("the Content-Type is %d bytes, above the maximum of 255", len(req.ContentType))
	}
	due, err := dueParam(req.Params.Delay, req.Params.At, time.Now())
	if err != nil {
		return nil, err
	}
	data, err := h.s.ReadItem(req.Body, "queue item")
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, api.InvalidBody("a queue item is the request's body, and this one is empty")
	}
	if due.IsZero() {
		id, err := h.queues.Enqueue(ctx, req.Name, prio, req.ContentType, data)
		if err != nil {
			return nil, err
		}
		return oapi.Enqueue201JSONResponse{Id: id, Priority: prio}, nil
	}
	id, err := h.queues.EnqueueDelayed(ctx, req.Name, prio, req.ContentType, data, due)
	if err != nil {
		return nil, err
	}
	out := oapi.Enqueue201JSONResponse{Id: id, Priority: prio}
	if strings.HasPrefix(id, "delayed.") { // not enqueued at once
		due = time.UnixMilli(due.UnixMilli()).UTC() // as stored: to the millisecond
		out.Due = &due
	}
	return out, nil
}

// dueParam is the due time that delay= or at= asks for, zero when neither is
// given; both, a malformed one, or one more than queue.MaxDelay ahead of now
// is a 400 invalid-parameter.
func dueParam(delay, at *string, now time.Time) (time.Time, error) {
	bad := func(param, format string, args ...any) error {
		p := api.InvalidParameter(format, args...)
		p.Ext = map[string]any{"parameter": param}
		return p
	}
	hasDelay, hasAt := delay != nil && *delay != "", at != nil && *at != ""
	switch {
	case hasDelay && hasAt:
		return time.Time{}, bad("at", "delay= and at= together: give one of them")
	case hasDelay:
		d, err := time.ParseDuration(*delay)
		switch {
		case err != nil:
			return time.Time{}, bad("delay", "delay=%s is not a duration such as 30s, 5m or 24h", specrules.Quote(*delay))
		case d < 0:
			return time.Time{}, bad("delay", "delay=%s is negative: delay takes a duration from 0s to %s", specrules.Quote(*delay), queue.MaxDelay)
		case d > queue.MaxDelay:
			return time.Time{}, bad("delay", "delay=%s is above the maximum of %s (30 days)", specrules.Quote(*delay), queue.MaxDelay)
		}
		return now.Add(d), nil
	case hasAt:
		t, err := time.Parse(time.RFC3339Nano, *at)
		switch {
		case err != nil:
			return time.Time{}, bad("at", "at=%s is not an RFC 3339 time such as 2026-11-28T12:00:00Z", specrules.Quote(*at))
		case t.Sub(now) > queue.MaxDelay:
			return time.Time{}, bad("at", "at=%s is more than %s (30 days) ahead", specrules.Quote(*at), queue.MaxDelay)
		}
		return t, nil
	}
	return time.Time{}, nil
}

// Take removes the first item and answers its bytes; 204 when the queue is empty.
func (h *Queues) Take(ctx context.Context, req oapi.TakeRequestObject) (oapi.TakeResponseObject, error) {
	if err := kit.CheckName("queue", req.Name); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	it, err := h.queues.Take(ctx, req.Name, wait)
	if err != nil {
		return nil, err
	}
	if it == nil {
		return oapi.Take204Response{}, nil
	}
	return oapi.Take200AsteriskResponse{
		Body:          bytes.NewReader(it.Data),
		Headers:       oapi.Take200ResponseHeaders{ItemId: &it.ID},
		ContentType:   it.ContentType,
		ContentLength: int64(len(it.Data)),
	}, nil
}

// Claim claims the first item for lease= (or an implicit lease from ttl=) and
// answers its bytes with Claim-Id; 204 when the queue is empty.
func (h *Queues) Claim(ctx context.Context, req oapi.ClaimRequestObject) (oapi.ClaimResponseObject, error) {
	p := req.Params
	if err := kit.CheckName("queue", req.Name); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	lease, done, err := h.s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	c, err := h.queues.Claim(ctx, lease, req.Name, wait)
	if err := done(err); err != nil {
		return nil, err
	}
	if c == nil {
		return oapi.Claim204Response{}, nil
	}
	return oapi.Claim200AsteriskResponse{
		Body:          bytes.NewReader(c.Item.Data),
		Headers:       oapi.Claim200ResponseHeaders{ClaimId: &c.ID, ItemId: &c.Item.ID},
		ContentType:   c.Item.ContentType,
		ContentLength: int64(len(c.Item.Data)),
	}, nil
}

// AckClaim deletes a claimed item.
func (h *Queues) AckClaim(ctx context.Context, req oapi.AckClaimRequestObject) (oapi.AckClaimResponseObject, error) {
	if err := h.ownClaim(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	if err := h.queues.Ack(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	return oapi.AckClaim204Response{}, nil
}

// ReleaseClaim gives a claimed item back, in its old place.
func (h *Queues) ReleaseClaim(ctx context.Context, req oapi.ReleaseClaimRequestObject) (oapi.ReleaseClaimResponseObject, error) {
	if err := h.ownClaim(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	if err := h.queues.Release(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	return oapi.ReleaseClaim204Response{}, nil
}

// ownClaim checks the names and that the claim is held by a lease of the
// request's token: a claim of another token does not exist (404 claim-not-found).
func (h *Queues) ownClaim(ctx context.Context, queueName, claim string) error {
	if err := kit.CheckName("queue", queueName); err != nil {
		return err
	}
	if err := kit.CheckName("claim", claim); err != nil {
		return err
	}
	l, err := h.queues.ClaimLease(queueName, claim)
	if err != nil {
		return err
	}
	if !api.Owns(ctx, l) {
		return fmt.Errorf("claim %q in queue %q: %w", claim, queueName, queue.ErrClaimNotFound)
	}
	return nil
}

// GetQueue counts the waiting and claimed items.
func (h *Queues) GetQueue(ctx context.Context, req oapi.GetQueueRequestObject) (oapi.GetQueueResponseObject, error) {
	st, err := h.queues.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetQueue200JSONResponse{Name: st.Name, Length: st.Length, Claimed: st.Claimed, Delayed: st.Delayed}, nil
}

// ListQueueItems lists the first waiting items in take order.
func (h *Queues) ListQueueItems(ctx context.Context, req oapi.ListQueueItemsRequestObject) (oapi.ListQueueItemsResponseObject, error) {
	if err := kit.CheckName("queue", req.Name); err != nil {
		return nil, err
	}
	limit := 100
	if l := req.Params.Limit; l != nil {
		limit = *l
	}
	if limit < 1 || limit > queue.MaxListItems {
		return nil, api.InvalidParameter("limit=%d: must be between 1 and %d", limit, queue.MaxListItems)
	}
	items, err := h.queues.Items(ctx, req.Name, limit)
	if err != nil {
		return nil, err
	}
	out := make([]oapi.QueueItem, len(items))
	for i, it := range items {
		out[i] = oapi.QueueItem{Id: it.ID, Priority: it.Priority, Size: it.Size}
	}
	return oapi.ListQueueItems200JSONResponse{Items: out}, nil
}

// ListQueues answers every queue with its length and claimed count.
func (h *Queues) ListQueues(ctx context.Context, req oapi.ListQueuesRequestObject) (oapi.ListQueuesResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "queues", h.queues.List, h.read)
	return oapi.ListQueues200JSONResponse{Queues: items, Next: next}, err
}

// read is a queue as its list and the picture show it.
func (h *Queues) read(ctx context.Context, n string) (oapi.Queue, error) {
	return api.ReadVia(h.queues.Inspect, func(st *queue.QueueState) oapi.Queue {
		return oapi.Queue{Name: st.Name, Length: st.Length, Claimed: st.Claimed, Delayed: st.Delayed}
	})(ctx, n)
}
