package recipes

import "github.com/prometheus/client_golang/prometheus"

// Barriers are ZooKeeper barriers and double barriers.
type Barriers struct {
	s *Session
}

// NewBarriers returns the barrier recipes over a session.
func NewBarriers(s *Session, reg prometheus.Registerer) *Barriers {
	return &Barriers{s: s}
}
