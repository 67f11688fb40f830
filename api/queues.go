package api

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
)

// Enqueue stores the raw body, with its Content-Type, at the end of its priority.
func (s *Server) Enqueue(ctx context.Context, req oapi.EnqueueRequestObject) (oapi.EnqueueResponseObject, error) {
	if err := name("queue", req.Name); err != nil {
		return nil, err
	}
	prio := 0
	if p := req.Params.Priority; p != nil {
		prio = *p
	}
	if prio < 0 || prio > queue.MaxPriority {
		return nil, InvalidParameter("priority=%d: must be between 0 and %d", prio, queue.MaxPriority)
	}
	if len(req.ContentType) > 255 {
		return nil, InvalidParameter("the Content-Type is %d bytes, above the maximum of 255", len(req.ContentType))
	}
	data, err := s.ReadItem(req.Body, "queue item")
	if err != nil {
		return nil, err
	}
	if len(data) == 0 {
		return nil, invalidBody("a queue item is the request's body, and this one is empty")
	}
	id, err := s.opt.Queues.Enqueue(ctx, req.Name, prio, req.ContentType, data)
	if err != nil {
		return nil, err
	}
	return oapi.Enqueue201JSONResponse{Id: id, Priority: prio}, nil
}

// readItem reads a body of at most MaxItem bytes (what: "queue item", "value");
// above it, 413 and nothing kept.
func (s *Server) ReadItem(body io.Reader, what string) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, s.opt.MaxItem+1))
	if err != nil {
		// Above --max-body: a 413 too; a body shorter than its Content-Length or
		// too slow: the client's fault, a 4xx.
		return nil, bodyError(err)
	}
	if int64(len(data)) > s.opt.MaxItem {
		return nil, NewProblem(http.StatusRequestEntityTooLarge, "body-too-large",
			fmt.Sprintf("a %s is at most %d bytes (--max-item)", what, s.opt.MaxItem))
	}
	return data, nil
}

// Take removes the first item and answers its bytes; 204 when the queue is empty.
func (s *Server) Take(ctx context.Context, req oapi.TakeRequestObject) (oapi.TakeResponseObject, error) {
	if err := name("queue", req.Name); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	it, err := s.opt.Queues.Take(ctx, req.Name, wait)
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
func (s *Server) Claim(ctx context.Context, req oapi.ClaimRequestObject) (oapi.ClaimResponseObject, error) {
	p := req.Params
	if err := name("queue", req.Name); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	c, err := s.opt.Queues.Claim(ctx, lease, req.Name, wait)
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
func (s *Server) AckClaim(ctx context.Context, req oapi.AckClaimRequestObject) (oapi.AckClaimResponseObject, error) {
	if err := s.ownClaim(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	if err := s.opt.Queues.Ack(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	return oapi.AckClaim204Response{}, nil
}

// ReleaseClaim gives a claimed item back, in its old place.
func (s *Server) ReleaseClaim(ctx context.Context, req oapi.ReleaseClaimRequestObject) (oapi.ReleaseClaimResponseObject, error) {
	if err := s.ownClaim(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	if err := s.opt.Queues.Release(ctx, req.Name, req.Claim); err != nil {
		return nil, err
	}
	return oapi.ReleaseClaim204Response{}, nil
}

// ownClaim checks the names and that the claim is held by a lease of the
// request's token: a claim of another token does not exist (404 claim-not-found).
func (s *Server) ownClaim(ctx context.Context, queueName, claim string) error {
	if err := name("queue", queueName); err != nil {
		return err
	}
	if err := name("claim", claim); err != nil {
		return err
	}
	l, err := s.opt.Queues.ClaimLease(queueName, claim)
	if err != nil {
		return err
	}
	if l.Owner != principalOf(ctx).name {
		return fmt.Errorf("claim %q in queue %q: %w", claim, queueName, queue.ErrClaimNotFound)
	}
	return nil
}

// GetQueue counts the waiting and claimed items.
func (s *Server) GetQueue(ctx context.Context, req oapi.GetQueueRequestObject) (oapi.GetQueueResponseObject, error) {
	if err := name("queue", req.Name); err != nil {
		return nil, err
	}
	st, err := s.opt.Queues.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetQueue200JSONResponse{Name: st.Name, Length: st.Length, Claimed: st.Claimed}, nil
}

// ListQueueItems lists the first waiting items in take order.
func (s *Server) ListQueueItems(ctx context.Context, req oapi.ListQueueItemsRequestObject) (oapi.ListQueueItemsResponseObject, error) {
	if err := name("queue", req.Name); err != nil {
		return nil, err
	}
	limit := 100
	if l := req.Params.Limit; l != nil {
		limit = *l
	}
	if limit < 1 || limit > queue.MaxListItems {
		return nil, InvalidParameter("limit=%d: must be between 1 and %d", limit, queue.MaxListItems)
	}
	items, err := s.opt.Queues.Items(ctx, req.Name, limit)
	if err != nil {
		return nil, err
	}
	out := make([]oapi.QueueItem, len(items))
	for i, it := range items {
		out[i] = oapi.QueueItem{Id: it.ID, Priority: it.Priority, Size: it.Size}
	}
	return oapi.ListQueueItems200JSONResponse{Items: out}, nil
}
