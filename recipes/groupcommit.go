package recipes

import "sync"

// groupCommit sends requests in batches: each batch carries everything that
// arrived while earlier batches were under way, and at most maxFlushes batches
// are under way at once. A caller that finds a free flush slot sends the batch
// itself, on its own goroutine, so a lone request goes out without a hand-off;
// what is left pending after that goes on in a goroutine. Requests are sent in
// arrival order.
type groupCommit[R comparable] struct {
	maxFlushes int
	// take returns how many of pending (never empty) the next batch carries (>= 1).
	take func(pending []R) int
	// send sends one batch and answers each of its requests.
	send func(batch []R)

	mu       sync.Mutex
	pending  []R
	flushing int
}

// submit queues r to be sent; send answers it.
func (g *groupCommit[R]) submit(r R) {
	g.mu.Lock()
	g.pending = append(g.pending, r)
	lead := g.flushing < g.maxFlushes
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
	g.send(batch)
	g.mu.Lock()
	more := len(g.pending) > 0
	if !more {
		g.flushing--
	}
	g.mu.Unlock()
	if more {
		go g.run()
	}
}

// withdraw removes r if it was not taken into a batch yet, and tells whether it
// did: when it did not, r is (being) sent and send will answer it.
func (g *groupCommit[R]) withdraw(r R) bool {
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
func (g *groupCommit[R]) run() {
	for batch := g.next(); batch != nil; batch = g.next() {
		g.send(batch)
	}
}

// next takes the next batch off pending; with nothing pending, the caller stops
// being a flusher and gets nil.
func (g *groupCommit[R]) next() []R {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		g.flushing--
		return nil
	}
	n := min(max(g.take(g.pending), 1), len(g.pending))
	batch := g.pending[:n:n]
	g.pending = append([]R(nil), g.pending[n:]...)
	return batch
}
