// Package barriers is the HTTP side of the barriers and double barriers
// (recipes/barrier): raise, lower, read and wait on a barrier; enter, leave
// and read a double barrier; their lists and their places in the picture.
package barriers

import (
	"context"
	"errors"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/barrier"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Barriers serves the barrier and double barrier operations of openapi.yaml.
type Barriers struct {
	s        *api.Server
	barriers *barrier.Barriers
}

// Tokens are the token kinds of the barrier and the double barrier.
func (*Barriers) Tokens() []string { return []string{"barriers", "double-barriers"} }

// Setup makes the barriers on env's session and describes them: their
// sections "barrier" and "double-barrier" (they have no stream of their own),
// their problems, and how a successor adopts a raised barrier and a
// participant.
func (h *Barriers) Setup(env api.Env) api.Descriptor {
	h.s, h.barriers = env.Server, barrier.New(env.Session, env.Registerer)
	return api.Descriptor{
		Sections: []picture.Section{
			{Name: "barrier", Token: "barriers", Event: "barrier", Dir: "barriers", Field: "name",
				Follow: h.s.Inspected("barriers", picture.BodyOf(h.readBarrier), nil)},
			{Name: "double-barrier", Token: "double-barriers", Event: "double-barrier", Dir: "double-barriers", Field: "name",
				Follow: h.s.Inspected("double-barriers", picture.BodyOf(h.readDoubleBarrier), nil)},
		},
		Problems: problems,
		Adoptions: map[string]kit.Adoption{
			barrier.BarrierKind:       {Adopt: h.barriers.AdoptRaised},
			barrier.DoubleBarrierKind: {Adopt: h.barriers.AdoptParticipant},
		},
	}
}

// problems are the barriers' own errors.
var problems = []api.ProblemRule{
	api.ProblemWith(http.StatusConflict, "barrier-not-ready", "the participant stays enrolled: enter again to go on waiting",
		func(notReady *barrier.BarrierNotReadyError) map[string]any {
			return map[string]any{"count": notReady.Count, "participants": notReady.Participants, "lease": notReady.Lease}
		}),
	api.ProblemWith(http.StatusConflict, "barrier-not-empty", "this participant has left",
		func(notEmpty *barrier.BarrierNotEmptyError) map[string]any {
			return map[string]any{"remaining": notEmpty.Remaining}
		}),
	api.ProblemWith(http.StatusConflict, "count-mismatch", "enter with that count, or wait until the barrier empties",
		func(mismatch *barrier.CountMismatchError) map[string]any {
			return map[string]any{"count": mismatch.Count}
		}),
	api.ProblemIs(barrier.ErrBarrierRaised, http.StatusConflict, "barrier-raised"),
	api.ProblemIs(barrier.ErrParticipantExists, http.StatusConflict, "participant-exists"),
}

// RaiseBarrier raises a barrier: persistent, or bound to lease= (it falls when
// the lease ends).
func (h *Barriers) RaiseBarrier(ctx context.Context, req oapi.RaiseBarrierRequestObject) (oapi.RaiseBarrierResponseObject, error) {
	if err := kit.CheckName("barrier", req.Name); err != nil {
		return nil, err
	}
	var err error
	if l := req.Params.Lease; l != nil && *l != "" {
		var lease *kit.Lease
		if lease, err = h.s.OwnLease(ctx, *l); err != nil {
			return nil, err
		}
		err = h.barriers.RaiseFor(ctx, lease, req.Name)
	} else {
		err = h.barriers.Raise(ctx, req.Name)
	}
	if err != nil {
		return nil, err
	}
	return oapi.RaiseBarrier204Response{}, nil
}

// LowerBarrier lowers a barrier however it was raised.
func (h *Barriers) LowerBarrier(ctx context.Context, req oapi.LowerBarrierRequestObject) (oapi.LowerBarrierResponseObject, error) {
	if err := h.barriers.Lower(ctx, req.Name); err != nil {
		return nil, err
	}
	return oapi.LowerBarrier204Response{}, nil
}

// GetBarrier tells whether a barrier is raised.
func (h *Barriers) GetBarrier(ctx context.Context, req oapi.GetBarrierRequestObject) (oapi.GetBarrierResponseObject, error) {
	up, err := h.barriers.Raised(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetBarrier200JSONResponse{Name: req.Name, Raised: up}, nil
}

// WaitBarrier answers once the barrier is lowered, or 409 barrier-raised.
func (h *Barriers) WaitBarrier(ctx context.Context, req oapi.WaitBarrierRequestObject) (oapi.WaitBarrierResponseObject, error) {
	if err := kit.CheckName("barrier", req.Name); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	if err := h.barriers.Wait(ctx, req.Name, wait); err != nil {
		return nil, err
	}
	return oapi.WaitBarrier200JSONResponse{Raised: false}, nil
}

// ListBarriers answers every raised barrier.
func (h *Barriers) ListBarriers(ctx context.Context, req oapi.ListBarriersRequestObject) (oapi.ListBarriersResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "barriers", h.barriers.List, h.readBarrier)
	return oapi.ListBarriers200JSONResponse{Barriers: items, Next: next}, err
}

// readBarrier is a barrier's read, shared by its list and the picture; it
// answers picture.ErrSkip for a barrier that is not raised.
func (h *Barriers) readBarrier(ctx context.Context, n string) (oapi.Barrier, error) {
	up, err := h.barriers.Raised(ctx, n)
	if err == nil && !up {
		err = picture.ErrSkip
	}
	return oapi.Barrier{Name: n, Raised: up}, err
}

// GetDoubleBarrier shows a double barrier's participants and readiness.
func (h *Barriers) GetDoubleBarrier(ctx context.Context, req oapi.GetDoubleBarrierRequestObject) (oapi.GetDoubleBarrierResponseObject, error) {
	st, err := h.barriers.InspectDouble(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetDoubleBarrier200JSONResponse(doubleBody(st)), nil
}

// EnterDoubleBarrier enrols a participant (for lease=, or an implicit lease from
// ttl=) and answers once `count` participants have entered.
func (h *Barriers) EnterDoubleBarrier(ctx context.Context, req oapi.EnterDoubleBarrierRequestObject) (oapi.EnterDoubleBarrierResponseObject, error) {
	p := req.Params
	if p.Count < 1 || p.Count > 100000 {
		return nil, api.InvalidParameter("count=%d: must be between 1 and 100000", p.Count)
	}
	hold, err := h.s.HoldFor(api.HoldRequest{Wait: p.Wait, Lease: p.Lease, TTL: p.Ttl})
	if err != nil {
		return nil, err
	}
	e, err := h.barriers.Enter(ctx, hold, req.Name, p.Id, p.Count, hold.Wait)
	if err := hold.Done(err); err != nil {
		return nil, err
	}
	return oapi.EnterDoubleBarrier201JSONResponse{Ready: true, Lease: &e.Lease}, nil
}

// LeaveDoubleBarrier removes a participant and answers once everyone has left.
func (h *Barriers) LeaveDoubleBarrier(ctx context.Context, req oapi.LeaveDoubleBarrierRequestObject) (oapi.LeaveDoubleBarrierResponseObject, error) {
	if err := kit.CheckName("double barrier", req.Name); err != nil {
		return nil, err
	}
	if err := kit.CheckName("participant", req.Id); err != nil {
		return nil, err
	}
	if err := kit.CheckName("lease", req.Params.Lease); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	// An ended lease (an implicit one ends with its participant) may still wait for
	// the others to leave; the recipe refuses it if the participant is still in.
	// A lease of another token is one that does not exist.
	lease, err := h.s.OwnLease(ctx, req.Params.Lease)
	if err != nil && !errors.Is(err, kit.ErrLeaseNotFound) {
		return nil, err
	}
	if err := h.barriers.Leave(ctx, lease, req.Name, req.Id, wait); err != nil {
		return nil, err
	}
	return oapi.LeaveDoubleBarrier204Response{}, nil
}

// ListDoubleBarriers answers every double barrier.
func (h *Barriers) ListDoubleBarriers(ctx context.Context, req oapi.ListDoubleBarriersRequestObject) (oapi.ListDoubleBarriersResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "double-barriers", h.barriers.ListDouble, h.readDoubleBarrier)
	return oapi.ListDoubleBarriers200JSONResponse{DoubleBarriers: items, Next: next}, err
}

// readDoubleBarrier is a double barrier's read, shared by its list and the
// picture.
func (h *Barriers) readDoubleBarrier(ctx context.Context, n string) (oapi.DoubleBarrier, error) {
	return api.ReadVia(h.barriers.InspectDouble, doubleBody)(ctx, n)
}

// doubleBody is a double barrier's state as the API shows it.
func doubleBody(st *barrier.DoubleBarrierState) oapi.DoubleBarrier {
	return oapi.DoubleBarrier{Name: st.Name, Count: st.Count, Ready: st.Ready, Participants: st.Participants}
}
