package api

import "context"

// Placeholders until the recipe lands: every one answers 501 not-implemented.

func (s *Server) LowerBarrier(_ context.Context, _ LowerBarrierRequestObject) (LowerBarrierResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) GetBarrier(_ context.Context, _ GetBarrierRequestObject) (GetBarrierResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) RaiseBarrier(_ context.Context, _ RaiseBarrierRequestObject) (RaiseBarrierResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) WaitBarrier(_ context.Context, _ WaitBarrierRequestObject) (WaitBarrierResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) GetDoubleBarrier(_ context.Context, _ GetDoubleBarrierRequestObject) (GetDoubleBarrierResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) EnterDoubleBarrier(_ context.Context, _ EnterDoubleBarrierRequestObject) (EnterDoubleBarrierResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) LeaveDoubleBarrier(_ context.Context, _ LeaveDoubleBarrierRequestObject) (LeaveDoubleBarrierResponseObject, error) {
	return nil, errNotImplemented
}
