package api

import "context"

// Placeholders until the recipe lands: every one answers 501 not-implemented.

func (s *Server) GetElection(_ context.Context, _ GetElectionRequestObject) (GetElectionResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) Campaign(_ context.Context, _ CampaignRequestObject) (CampaignResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) Resign(_ context.Context, _ ResignRequestObject) (ResignResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) Proclaim(_ context.Context, _ ProclaimRequestObject) (ProclaimResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) StreamElection(_ context.Context, _ StreamElectionRequestObject) (StreamElectionResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) StreamSession(_ context.Context, _ StreamSessionRequestObject) (StreamSessionResponseObject, error) {
	return nil, errNotImplemented
}
