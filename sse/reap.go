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

	mu      sync.Mutex
	watched map[*Writer]watched
	next    int // the step the next stream watched is checked at

	stop chan struct{}
	done chan struct{}
}

// watched is a stream's gone function and the step of each interval at which
// it is checked.
type watched struct {
	gone func()
	step int
}

// NewReaper starts a reaper that checks every interval (default 1s).
func NewReaper(every time.Duration) *Reaper {
	if every <= 0 {
		every = time.Second
	}
	r := &Reaper{every: every, watched: map[*Writer]watched{}, stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// Watch calls gone (once, from the reaper's goroutine) when w's client closes
// its connection; forget stops watching.
func (r *Reaper) Watch(w *Writer, gone func()) (forget func()) {
	r.mu.Lock()
	r.watched[w] = watched{gone: gone, step: r.next}
	r.next = (r.next + 1) % reapSteps
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		delete(r.watched, w)
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
		for w, v := range r.watched {
			if v.step == step {
				batch = append(batch, w)
			}
		}
		r.mu.Unlock()
		step = (step + 1) % reapSteps
		for _, w := range batch {
			if w.conn == nil || !peerClosed(w.conn, w.raw.rawConn()) {
				continue
			}
			r.mu.Lock()
			v, ok := r.watched[w]
			delete(r.watched, w)
			r.mu.Unlock()
			if ok {
				v.gone()
			}
		}
		clear(batch)
		batch = batch[:0]
	}
}
