package api

import (
	"context"
	"errors"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// RaiseBarrier raises a barrier: persistent, or bound to lease= (it falls when
// the lease ends).
func (s *Server) RaiseBarrier(ctx context.Context, req oapi.RaiseBarrierRequestObject) (oapi.RaiseBarrierResponseObject, error) {
	if err := name("barrier", req.Name); err != nil {
		return nil, err
	}
	var err error
	if l := req.Params.Lease; l != nil && *l != "" {
		var lease *kit.Lease
		if lease, err = s.OwnLease(ctx, *l); err != nil {
			return nil, err
		}
		err = s.opt.Barriers.RaiseFor(ctx, lease, req.Name)
	} else {
		err = s.opt.Barriers.Raise(ctx, req.Name)
	}
	if err != nil {
		return nil, err
	}
	return oapi.RaiseBarrier204Response{}, nil
}

// LowerBarrier lowers a barrier however it was raised.
func (s *Server) LowerBarrier(ctx context.Context, req oapi.LowerBarrierRequestObject) (oapi.LowerBarrierResponseObject, error) {
	if err := name("barrier", req.Name); err != nil {
		return nil, err
	}
	if err := s.opt.Barriers.Lower(ctx, req.Name); err != nil {
		return nil, err
	}
	return oapi.LowerBarrier204Response{}, nil
}

// GetBarrier tells whether a barrier is raised.
func (s *Server) GetBarrier(ctx context.Context, req oapi.GetBarrierRequestObject) (oapi.GetBarrierResponseObject, error) {
	if err := name("barrier", req.Name); err != nil {
		return nil, err
	}
	up, err := s.opt.Barriers.Raised(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetBarrier200JSONResponse{Name: req.Name, Raised: up}, nil
}

// WaitBarrier answers once the barrier is lowered, or 409 barrier-raised.
func (s *Server) WaitBarrier(ctx context.Context, req oapi.WaitBarrierRequestObject) (oapi.WaitBarrierResponseObject, error) {
	if err := name("barrier", req.Name); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Barriers.Wait(ctx, req.Name, wait); err != nil {
		return nil, err
	}
	return oapi.WaitBarrier200JSONResponse{Raised: false}, nil
}

// GetDoubleBarrier shows a double barrier's participants and readiness.
func (s *Server) GetDoubleBarrier(ctx context.Context, req oapi.GetDoubleBarrierRequestObject) (oapi.GetDoubleBarrierResponseObject, error) {
	if err := name("double barrier", req.Name); err != nil {
		return nil, err
	}
	st, err := s.opt.Barriers.InspectDouble(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetDoubleBarrier200JSONResponse{Name: st.Name, Count: st.Count, Ready: st.Ready, Participants: st.Participants}, nil
}

// EnterDoubleBarrier enrols a participant (for lease=, or an implicit lease from
// ttl=) and answers once `count` participants have entered.
func (s *Server) EnterDoubleBarrier(ctx context.Context, req oapi.EnterDoubleBarrierRequestObject) (oapi.EnterDoubleBarrierResponseObject, error) {
	p := req.Params
	if err := name("double barrier", req.Name); err != nil {
		return nil, err
	}
	if err := name("participant", p.Id); err != nil {
		return nil, err
	}
	if p.Count < 1 || p.Count > 100000 {
		return nil, InvalidParameter("count=%d: must be between 1 and 100000", p.Count)
	}
	wait, err := s.WaitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	e, err := s.opt.Barriers.Enter(ctx, lease, req.Name, p.Id, p.Count, wait)
	if err := done(err); err != nil {
		return nil, err
	}
	return oapi.EnterDoubleBarrier201JSONResponse{Ready: true, Lease: &e.Lease}, nil
}

// LeaveDoubleBarrier removes a participant and answers once everyone has left.
func (s *Server) LeaveDoubleBarrier(ctx context.Context, req oapi.LeaveDoubleBarrierRequestObject) (oapi.LeaveDoubleBarrierResponseObject, error) {
	if err := name("double barrier", req.Name); err != nil {
		return nil, err
	}
	if err := name("participant", req.Id); err != nil {
		return nil, err
	}
	if err := name("lease", req.Params.Lease); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	// An ended lease (an implicit one ends with its participant) may still wait for
	// the others to leave; the recipe refuses it if the participant is still in.
	// A lease of another token is one that does not exist.
	lease, err := s.OwnLease(ctx, req.Params.Lease)
	if err != nil && !errors.Is(err, kit.ErrLeaseNotFound) {
		return nil, err
	}
	if err := s.opt.Barriers.Leave(ctx, lease, req.Name, req.Id, wait); err != nil {
		return nil, err
	}
	return oapi.LeaveDoubleBarrier204Response{}, nil
}
