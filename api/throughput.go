package api

import "context"

// Placeholders until the recipe lands: every one answers 501 not-implemented.

func (s *Server) GetThroughputGroup(_ context.Context, _ GetThroughputGroupRequestObject) (GetThroughputGroupResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) SetThroughputLimit(_ context.Context, _ SetThroughputLimitRequestObject) (SetThroughputLimitResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) StreamThroughputGroup(_ context.Context, _ StreamThroughputGroupRequestObject) (StreamThroughputGroupResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) JoinThroughputGroup(_ context.Context, _ JoinThroughputGroupRequestObject) (JoinThroughputGroupResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) LeaveThroughputGroup(_ context.Context, _ LeaveThroughputGroupRequestObject) (LeaveThroughputGroupResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) GetThroughputMember(_ context.Context, _ GetThroughputMemberRequestObject) (GetThroughputMemberResponseObject, error) {
	return nil, errNotImplemented
}

func (s *Server) UpdateThroughputMember(_ context.Context, _ UpdateThroughputMemberRequestObject) (UpdateThroughputMemberResponseObject, error) {
	return nil, errNotImplemented
}

// followThroughput publishes a group's allocations to its topic (placeholder).
func (s *Server) followThroughput(topic, group string) {}
