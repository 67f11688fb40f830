package sse

import (
	"sync"
	"time"
)

// Reaper notices clients of hijacked streams that went away, without a goroutine
// per stream: one goroutine peeks at every watched connection each interval (a
// tenth of them every tenth of it) and calls the gone function of those whose
// peer closed. (A stream served by
// net/http learns this from its request context instead.)
type Reaper struct {
	every time.Duration

	mu sync.Mutex
	// watched holds each step's streams: a stream is checked at the step of
	// each interval it was put in, the next one round-robin.
	watched [reapSteps]map[*Writer]func()
	next    int

	stop chan struct{}
	done chan struct{}
}

// NewReaper starts a reaper that checks every interval (default 1s).
func NewReaper(every time.Duration) *Reaper {
	if every <= 0 {
		every = time.Second
	}
	r := &Reaper{every: every, stop: make(chan struct{}), done: make(chan struct{})}
	for i := range r.watched {
		r.watched[i] = map[*Writer]func(){}
	}
	go r.run()
	return r
}

// Watch calls gone (once, from the reaper's goroutine) when w's client closes
// its connection; forget stops watching.
func (r *Reaper) Watch(w *Writer, gone func()) (forget func()) {
	r.mu.Lock()
	step := r.next
	r.watched[step][w] = gone
	r.next = (r.next + 1) % reapSteps
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.watched[step], w)
		r.mu.Unlock()
	}
}

// Close stops the reaper.
func (r *Reaper) Close() {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
}

// reapSteps is how many steps a Reaper spreads each interval's checks over, so
// that with many streams it never peeks at all of them at once (which would
// hold a core for a while, delaying the events of that moment).
const reapSteps = 10

func (r *Reaper) run() {
	defer close(r.done)
	t := time.NewTicker(max(r.every/reapSteps, 1))
	defer t.Stop()
	// Each step checks the streams of that step, and holds none of them past
	// it: a stream that ended is never kept alive here.
	var batch []*Writer
	step := 0
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		set := r.watched[step]
		for w := range set {
			batch = append(batch, w)
		}
		r.mu.Unlock()
		step = (step + 1) % reapSteps
		for _, w := range batch {
			if w.conn == nil || !peerClosed(w.conn, w.raw.rawConn()) {
				continue
			}
			r.mu.Lock()
			gone, ok := set[w]
			delete(set, w)
			r.mu.Unlock()
			if ok {
				gone()
			}
		}
		clear(batch)
		batch = batch[:0]
	}
}
