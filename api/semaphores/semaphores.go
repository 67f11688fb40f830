// Package semaphores is the HTTP side of the counting semaphores
// (semaphore.Semaphores): acquire and release a permit, inspect, list, and its
// place in the picture.
package semaphores

import (
	"context"
	"net/http"

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

// Tokens are the semaphore's token kind.
func (*Semaphores) Tokens() []string { return []string{"semaphores"} }

// Setup makes the semaphore on env's session and describes it: its section
// "semaphore", the semaphore-full and max-mismatch problems, and how a
// successor adopts its holds.
func (h *Semaphores) Setup(env api.Env) api.Descriptor {
	h.s, h.semaphores = env.Server, semaphore.New(env.Session, env.Registerer)
	return api.Descriptor{
		Sections: []picture.Section{{Name: "semaphore", Token: "semaphores", Event: "semaphore", Dir: "semaphores", Field: "name",
			Follow: picture.Followed(h.semaphores.Follow, func(st *semaphore.SemaphoreState) any { return body(st) })}},
		Problems: []api.ProblemRule{
			api.ProblemWith(http.StatusConflict, "semaphore-full", "",
				func(full *semaphore.SemaphoreFullError) map[string]any {
					return map[string]any{"holders": api.SemaphoreHolders(full.Holders)}
				}),
			api.ProblemWith(http.StatusConflict, "max-mismatch", "acquire with that max, or wait until the semaphore's holders have all left",
				func(mismatch *semaphore.MaxMismatchError) map[string]any { return map[string]any{"max": mismatch.Max} }),
		},
		Adoptions: map[string]kit.Adoption{semaphore.SemaphoreKind: {
			Adopt: h.semaphores.Adopt, Lines: h.semaphores.Lines(), Parts: h.semaphores.Parts()}},
	}
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
