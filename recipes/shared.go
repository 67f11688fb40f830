package recipes

import (
	"context"
	"sync"
	"time"

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

// retryEvery is how soon a watcher tries again after a failed call while the
// session stays connected.
const retryEvery = 250 * time.Millisecond

// watchLoop drives one watcher until stop closes. Under the connected session
// it calls step, with fresh set when that session is not the one of the last
// call (its watches are gone: everything must be read and armed again); it
// calls step again at every wake-up and session change. After a failed step it
// calls failed (the state is no longer known) and tries again within retryEvery
// (a call cut off under a connected session), or at the next session change.
// ctx, given to step, ends when stop closes.
func watchLoop(s *Session, stop, wake <-chan struct{}, step func(ctx context.Context, ep *epoch, fresh bool) error, failed func()) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	var last *epoch
	for {
		sessChanged := s.Changed()
		ep, err := s.current()
		if err == nil {
			err = step(ctx, ep, ep != last)
			last = ep
		}
		var retry <-chan time.Time
		if err != nil {
			failed()
			if ctx.Err() == nil {
				retry = time.After(retryEvery)
			}
		}
		select {
		case <-wake:
		case <-retry:
		case <-sessChanged:
		case <-stop:
			return
		}
	}
}
