package recipes

import "github.com/prometheus/client_golang/prometheus"

// Elections are leader elections in Curator LeaderLatch's layout.
type Elections struct {
	s *Session
}

// NewElections returns the election recipe over a session.
func NewElections(s *Session, reg prometheus.Registerer) *Elections {
	return &Elections{s: s}
}
