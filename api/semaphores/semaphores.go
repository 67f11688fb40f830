// Package semaphores is the HTTP side of the counting semaphores
// (semaphore.Semaphores): acquire and release a permit, inspect, list, and its
// place in the picture.
package semaphores

import (
	"context"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/semaphore"
)

// Semaphores serves the semaphore operations of openapi.yaml.
type Semaphores struct {
	s          *api.Server
	semaphores *semaphore.Semaphores
}

var _ kit.Holding = (*semaphore.Permit)(nil)

// New registers the semaphore's picture kind with s (it has no stream of its
// own).
func New(s *api.Server, semaphores *semaphore.Semaphores) *Semaphores {
	h := &Semaphores{s: s, semaphores: semaphores}
	s.Register(api.Recipe{
		Kinds: []picture.Kind{{Kind: "semaphore", Event: "semaphore", Dir: "semaphores", Field: "name",
			Follow: picture.Followed(semaphores.Follow, func(st *semaphore.SemaphoreState) any { return body(st) })}},
	})
	return h
}

// AcquirePermit takes a permit for a lease (implicit when lease= is absent).
func (h *Semaphores) AcquirePermit(ctx context.Context, req oapi.AcquirePermitRequestObject) (oapi.AcquirePermitResponseObject, error) {
	p := req.Params
	if p.Max < 1 {
		return nil, api.InvalidParameter("max=%d: a semaphore has at least one permit", p.Max)
	}
	hold, err := h.s.HoldFor(api.HoldRequest{Wait: p.Wait, Owner: p.Owner, Lease: p.Lease, TTL: p.Ttl})
	if err != nil {
		return nil, err
	}
	g, err := h.semaphores.Acquire(ctx, hold, req.Name, hold.Owner, p.Max, hold.Wait)
	if err := hold.Done(err); err != nil {
		return nil, err
	}
	return oapi.AcquirePermit201JSONResponse{Name: g.Name, Permit: g.Permit, Lease: g.Lease, Owner: g.Owner,
		Max: g.Max, AcquiredAt: g.AcquiredAt.UTC()}, nil
}

// GetSemaphore shows the semaphore's holders and waiters.
func (h *Semaphores) GetSemaphore(ctx context.Context, req oapi.GetSemaphoreRequestObject) (oapi.GetSemaphoreResponseObject, error) {
	st, err := h.semaphores.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetSemaphore200JSONResponse(body(st)), nil
}

// ReleasePermit releases the permit held by lease=.
func (h *Semaphores) ReleasePermit(ctx context.Context, req oapi.ReleasePermitRequestObject) (oapi.ReleasePermitResponseObject, error) {
	if err := h.semaphores.Release(ctx, h.s.Owned(req.Params.Lease), req.Name, req.Permit); err != nil {
		return nil, err
	}
	return oapi.ReleasePermit204Response{}, nil
}

// ListSemaphores answers every semaphore with its holders and waiters.
func (h *Semaphores) ListSemaphores(ctx context.Context, req oapi.ListSemaphoresRequestObject) (oapi.ListSemaphoresResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "semaphores", h.semaphores.List, api.ReadVia(h.semaphores.Inspect, body))
	return oapi.ListSemaphores200JSONResponse{Semaphores: items, Next: next}, err
}

// body is a semaphore's state as the API shows it.
func body(st *semaphore.SemaphoreState) oapi.Semaphore {
	return oapi.Semaphore{Name: st.Name, Holders: api.SemaphoreHolders(st.Holders), Waiters: st.Waiters}
}
