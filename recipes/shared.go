package recipes

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// sharedWatches runs one watcher per name for all its followers, so however many
// streams and long-polls follow an election or a group, the sidecar holds one set
// of ZooKeeper watches for it: the first acquire starts the watcher, the last
// release stops it and waits until it has ended. gauge counts live watchers.
type sharedWatches[W any] struct {
	mu      sync.Mutex
	entries map[string]*sharedWatch[W]
	gauge   prometheus.Gauge
}

type sharedWatch[W any] struct {
	w    W
	halt func() // stops the watcher and waits for it
	refs int
}

func newSharedWatches[W any](gauge prometheus.Gauge) *sharedWatches[W] {
	return &sharedWatches[W]{entries: map[string]*sharedWatch[W]{}, gauge: gauge}
}

// acquire returns the watcher of name, started by start (which returns it and
// its halt function) when it has none.
func (s *sharedWatches[W]) acquire(name string, start func() (W, func())) W {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entries[name]
	if e == nil {
		w, halt := start()
		e = &sharedWatch[W]{w: w, halt: halt}
		s.entries[name] = e
		s.gauge.Inc()
	}
	e.refs++
	return e.w
}

// release drops one follower of name; the last one stops the watcher.
func (s *sharedWatches[W]) release(name string) {
	s.mu.Lock()
	e := s.entries[name]
	e.refs--
	last := e.refs == 0
	if last {
		delete(s.entries, name)
		s.gauge.Dec()
	}
	s.mu.Unlock()
	if last {
		e.halt()
	}
}

// len is the number of live watchers.
func (s *sharedWatches[W]) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}
