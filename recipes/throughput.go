package recipes

import "github.com/prometheus/client_golang/prometheus"

// Throughputs are throughput groups: an elected member splits a cluster-wide limit
// among the live members.
type Throughputs struct {
	s *Session
}

// NewThroughputs returns the throughput-group recipe over a session.
func NewThroughputs(s *Session, reg prometheus.Registerer) *Throughputs {
	return &Throughputs{s: s}
}
