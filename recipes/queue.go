package recipes

import "github.com/prometheus/client_golang/prometheus"

// Queues are durable ZooKeeper queues.
type Queues struct {
	s *Session
}

// NewQueues returns the queue recipe over a session.
func NewQueues(s *Session, reg prometheus.Registerer) *Queues {
	return &Queues{s: s}
}
