package zookeeper

import "sync"

// GroupCommit sends requests in batches: each batch carries requests in the
// order they arrived, everything that arrived while earlier batches were under
// way, and at most MaxFlushes batches are under way at once, so batches may be
// answered in any order. A caller that finds a free flush slot sends the batch
// itself, on its own goroutine, so a lone request goes out without a hand-off;
// what is left pending after that goes on in a goroutine of the Session given
// as Owner, which Session.Close waits for.
type GroupCommit[R comparable] struct {
	// MaxFlushes bounds the batches under way at once (>= 1).
	MaxFlushes int
	// Take returns how many of pending (never empty) the next batch carries (>= 1).
	Take func(pending []R) int
	// Send sends one batch and answers each of its requests.
	Send func(batch []R)
	// Owner runs the goroutines that drain what is left pending.
	Owner *Session

	mu       sync.Mutex
	pending  []R
	flushing int
}

// Submit queues r to be sent; Send answers it.
func (g *GroupCommit[R]) Submit(r R) {
	g.mu.Lock()
	g.pending = append(g.pending, r)
	lead := g.flushing < g.MaxFlushes
	if lead {
		g.flushing++
	}
	g.mu.Unlock()
	if !lead {
		return
	}
	batch := g.next()
	if batch == nil {
		return
	}
	g.Send(batch)
	g.mu.Lock()
	more := len(g.pending) > 0
	if !more {
		g.flushing--
	}
	g.mu.Unlock()
	if more {
		g.Owner.Go(g.run)
	}
}

// Withdraw removes r if it was not taken into a batch yet, and tells whether it
// did: when it did not, r is (being) sent and Send will answer it.
func (g *GroupCommit[R]) Withdraw(r R) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, p := range g.pending {
		if p == r {
			g.pending = append(g.pending[:i], g.pending[i+1:]...)
			return true
		}
	}
	return false
}

// run sends batches until nothing is pending.
func (g *GroupCommit[R]) run() {
	for batch := g.next(); batch != nil; batch = g.next() {
		g.Send(batch)
	}
}

// next takes the next batch off pending; with nothing pending, the caller stops
// being a flusher and gets nil.
func (g *GroupCommit[R]) next() []R {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.flushing--
		return nil
	}
	n := min(max(g.Take(g.pending), 1), len(g.pending))
	batch := g.pending[:n:n]
	g.pending = append([]R(nil), g.pending[n:]...)
	return batch
}
