// Package leases is the HTTP side of the leases (kit.Leases): grant, read,
// keep alive, revoke, and the keepalive stream that holds a lease while it is
// open. The leases of a request (lease=, an implicit lease from ttl=) are
// api.Server's, shared by every recipe.
package leases

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Leases serves the lease operations of openapi.yaml.
type Leases struct {
	s      *api.Server
	leases *kit.Leases
}

// Tokens is none: the lease operations have no token kind (a lease of another token
// does not exist for a request: their handlers check the owner).
func (*Leases) Tokens() []string { return nil }

// Setup serves the lease operations over env's leases; they describe nothing:
// the leases are api.Server's, shared by every recipe.
func (h *Leases) Setup(env api.Env) api.Descriptor {
	h.s, h.leases = env.Server, env.Leases
	return api.Descriptor{}
}

// CreateLease grants a lease bound to the current ZooKeeper session.
func (h *Leases) CreateLease(ctx context.Context, req oapi.CreateLeaseRequestObject) (oapi.CreateLeaseResponseObject, error) {
	ttl, err := h.s.TTLParam(req.Params.Ttl)
	if err != nil {
		return nil, err
	}
	l, err := h.s.GrantLease(ctx, ttl, false)
	if err != nil {
		return nil, err
	}
	return oapi.CreateLease201JSONResponse(leaseBody(l)), nil
}

// ListLeases answers the request's token's leases, paged by id.
func (h *Leases) ListLeases(ctx context.Context, req oapi.ListLeasesRequestObject) (oapi.ListLeasesResponseObject, error) {
	p := req.Params
	own := func(context.Context) ([]string, error) {
		return h.leases.IDs(func(l *kit.Lease) bool { return api.Owns(ctx, l) }), nil
	}
	read := func(ctx context.Context, id string) (oapi.LeaseDetail, error) {
		l, err := h.leases.Get(id)
		if err != nil { // ended since it was listed
			return oapi.LeaseDetail{}, picture.ErrSkip
		}
		return leaseDetail(l), nil
	}
	items, next, err := api.List(ctx, p.Prefix, p.Limit, p.After, "", own, read)
	return oapi.ListLeases200JSONResponse{Leases: items, Next: next}, err
}

// GetLease shows a lease and what it holds.
func (h *Leases) GetLease(ctx context.Context, req oapi.GetLeaseRequestObject) (oapi.GetLeaseResponseObject, error) {
	l, err := h.s.OwnLease(ctx, req.Lease)
	if err != nil {
		return nil, err
	}
	return oapi.GetLease200JSONResponse(leaseDetail(l)), nil
}

// KeepAliveLease pushes a lease's expiry to now + ttl.
func (h *Leases) KeepAliveLease(ctx context.Context, req oapi.KeepAliveLeaseRequestObject) (oapi.KeepAliveLeaseResponseObject, error) {
	if _, err := h.s.OwnLease(ctx, req.Lease); err != nil {
		return nil, err
	}
	l, err := h.leases.KeepAlive(req.Lease)
	if err != nil {
		return nil, err
	}
	return oapi.KeepAliveLease200JSONResponse(leaseBody(l)), nil
}

// RevokeLease ends a lease; what it held is released before the answer.
func (h *Leases) RevokeLease(ctx context.Context, req oapi.RevokeLeaseRequestObject) (oapi.RevokeLeaseResponseObject, error) {
	if _, err := h.s.OwnLease(ctx, req.Lease); err != nil {
		return nil, err
	}
	if err := h.leases.Revoke(req.Lease); err != nil {
		return nil, err
	}
	return oapi.RevokeLease204Response{}, nil
}

// StreamLease is the keepalive stream: the lease lives while it is open and is
// revoked when it closes.
func (h *Leases) StreamLease(ctx context.Context, req oapi.StreamLeaseRequestObject) (oapi.StreamLeaseResponseObject, error) {
	l, err := h.s.OwnLease(ctx, req.Lease)
	if err != nil {
		return nil, err
	}
	return leaseStream{h: h, ctx: ctx, lease: l}, nil
}

type leaseStream struct {
	h     *Leases
	ctx   context.Context
	lease *kit.Lease
}

// VisitStreamLeaseResponse writes the stream: `lease` first, a `lost-hold` for
// every hold that ends because its node was deleted by another hand, then the
// end of the lease (`lost`, `expired` or `revoked`), with heartbeat comments
// between.
func (ls leaseStream) VisitStreamLeaseResponse(w http.ResponseWriter) error {
	l, h := ls.lease, ls.h
	unpin := l.Pin()
	defer unpin()
	sw, err := sse.NewWriter(w, 10*time.Second)
	if err != nil {
		return err
	}
	id := 0
	send := func(event string, v any) error {
		data, err := sse.Data(v)
		if err != nil {
			return err
		}
		id++
		return sw.Send(sse.Event{ID: strconv.Itoa(id), Name: event, Data: data})
	}
	if err := send("lease", leaseDetail(l)); err != nil {
		_ = h.leases.Revoke(l.ID)
		return nil
	}
	beat := time.NewTicker(h.s.Heartbeat())
	defer beat.Stop()
	told := 0 // lost holds sent
	tellLost := func() error {
		lost, _ := l.LostHolds(told)
		for _, h := range lost {
			told++
			if err := send("lost-hold", oapi.LostHold{Kind: h.Kind, Name: h.Name, Reason: h.Reason}); err != nil {
				return err
			}
		}
		return nil
	}
	end := func() error {
		<-l.Done()
		if err := tellLost(); err != nil {
			return err
		}
		return send(kit.EndReason(l.Err()), map[string]string{"lease": l.ID, "reason": l.Err().Error()})
	}
	for {
		_, nextLoss := l.LostHolds(told)
		select {
		case <-nextLoss:
			if err := tellLost(); err != nil {
				_ = h.leases.Revoke(l.ID)
				return nil
			}
		case <-l.Ending():
			_ = end()
			return nil
		case <-ls.ctx.Done():
			if h.s.HandingOver() {
				// A planned upgrade: the successor resumes the lease; its client
				// reconnects there within the TTL.
				h.s.RetryHint(sw)
				return nil
			}
			// The client closed the stream (or the sidecar is shutting down): the
			// lease ends now, and what it held is released.
			_ = h.leases.Revoke(l.ID)
			_ = end()
			return nil
		case <-beat.C:
			if err := sw.Comment("keepalive"); err != nil {
				_ = h.leases.Revoke(l.ID)
				return nil
			}
		}
	}
}

func leaseBody(l *kit.Lease) oapi.Lease {
	return oapi.Lease{Lease: l.ID, Ttl: l.TTL.String(), ExpiresAt: l.ExpiresAt().UTC()}
}

func leaseDetail(l *kit.Lease) oapi.LeaseDetail {
	b := leaseBody(l)
	holds := []oapi.Hold{}
	for _, h := range l.Holds() {
		holds = append(holds, oapi.Hold{Kind: h.Kind, Name: h.Name})
	}
	return oapi.LeaseDetail{Lease: b.Lease, Ttl: b.Ttl, ExpiresAt: b.ExpiresAt, Holds: holds}
}
