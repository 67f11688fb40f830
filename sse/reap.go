package sse

import (
	"sync"
	"time"
)

// Reaper notices clients of hijacked streams that went away, without a goroutine
// per stream: one goroutine peeks at every watched connection each interval (a
// tenth of them every tenth of it) and calls the gone function of those whose
// peer closed. (A stream served by
// net/http learns this from its request context instead.) With nothing
// watched it sleeps: an idle sidecar is not woken ten times a second.
type Reaper struct {
	every time.Duration

	mu sync.Mutex
	// watched holds each step's streams: a stream is checked at the step of
	// each interval it was put in, the next one round-robin.
	watched [reapSteps]map[*Writer]func()
	next    int
	count   int           // streams watched, in every step
	wake    chan struct{} // a first stream to watch after none (1 buffered)

	stop chan struct{}
	done chan struct{}
}

// NewReaper starts a reaper that checks every interval (default 1s).
func NewReaper(every time.Duration) *Reaper {
	if every <= 0 {
		every = time.Second
	}
	r := &Reaper{every: every, stop: make(chan struct{}), done: make(chan struct{}), wake: make(chan struct{}, 1)}
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
	if _, again := r.watched[step][w]; !again {
		r.count++
	}
	r.watched[step][w] = gone
	r.next = (r.next + 1) % reapSteps
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	return func() {
		r.mu.Lock()
		r.forgetLocked(step, w)
		r.mu.Unlock()
	}
}

// forgetLocked stops watching w in step, if it still is; r.mu is held.
func (r *Reaper) forgetLocked(step int, w *Writer) {
	if _, ok := r.watched[step][w]; ok {
		delete(r.watched[step], w)
		r.count--
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
	interval := max(r.every/reapSteps, 1)
	t := time.NewTicker(interval)
	defer t.Stop()
	// Each step checks the streams of that step, and holds none of them past
	// it: a stream that ended is never kept alive here.
	var batch []*Writer
	step := 0
	for {
		if r.idle() {
			t.Stop()
			select {
			case <-r.stop:
				return
			case <-r.wake:
			}
			t.Reset(interval)
			continue
		}
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		r.mu.Lock()
		setStep, set := step, r.watched[step]
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
			r.forgetLocked(setStep, w)
			r.mu.Unlock()
			if ok {
				gone()
			}
		}
		clear(batch)
		batch = batch[:0]
	}
}

// idle tells whether no stream is watched.
func (r *Reaper) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count == 0
}
