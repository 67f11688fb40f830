package api

import "context"

// Placeholders until the recipe lands: every one answers 501 not-implemented.

func (s *Server) GetQueue(_ context.Context, _ GetQueueRequestObject) (GetQueueResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) Claim(_ context.Context, _ ClaimRequestObject) (ClaimResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) AckClaim(_ context.Context, _ AckClaimRequestObject) (AckClaimResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) ReleaseClaim(_ context.Context, _ ReleaseClaimRequestObject) (ReleaseClaimResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) ListQueueItems(_ context.Context, _ ListQueueItemsRequestObject) (ListQueueItemsResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) Enqueue(_ context.Context, _ EnqueueRequestObject) (EnqueueResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) Take(_ context.Context, _ TakeRequestObject) (TakeResponseObject, error) {
	return nil, errNotImplemented
}
