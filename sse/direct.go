package sse

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Direct writes. Waking one goroutine per subscriber per event costs more than
// the write itself when thousands follow one topic. So a stream that Serve
// writes to a hijacked socket is attached to the broker: Publish marks the
// subscriptions it gave an event to, and a few flusher goroutines owned by the
// broker take each one's waiting events and write their frames (made once per
// publication, shared by all) straight to its socket without blocking. Serve's
// goroutine is woken only when that cannot be done at once:
//
//   - Serve holds the Writer (it writes a heartbeat, or a write of its own blocks):
//     the flusher leaves the subscription to it;
//   - the socket's buffer is full: what was not written (the rest of a frame, the
//     events after it) is kept in the Writer, and Serve writes it, blocking under
//     the write deadline, before anything newer;
//   - a write failed: the error is kept and Serve returns it.
//
// Whoever writes holds Writer.mu and takes events from the subscription's queue
// in publish order, so order, no loss and no duplication are the queue's, as
// for Serve alone. A flusher never blocks (TryLock, non-blocking writes), so a
// stuck client holds up nobody else; its queue fills and the broker drops it
// (ErrSlowSubscriber) as before. Lock order: Writer.mu, Broker.mu,
// Subscription.mu.

// flushChunk is how many subscriptions a flusher takes from the list at a time.
const flushChunk = 128

// flusher is the list of subscriptions to write and the goroutines that write
// them; Broker.Close stops them and waits.
type flusher struct {
	mu   sync.Mutex
	subs []*Subscription // to write: subs[head:]
	head int

	wake chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup

	// written counts the events the flushers wrote, left the times a full
	// socket left the rest to Serve (the Broker's, read by tests).
	written, left *atomic.Int64
}

func newFlusher(n int, written, left *atomic.Int64) *flusher {
	f := &flusher{wake: make(chan struct{}, 1), stop: make(chan struct{}), written: written, left: left}
	for range n {
		f.wg.Go(f.run)
	}
	return f
}

// add queues subs (each marked queued) and wakes a flusher.
func (f *flusher) add(subs []*Subscription) {
	f.mu.Lock()
	f.subs = append(f.subs, subs...)
	f.mu.Unlock()
	f.signal()
}

func (f *flusher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// next moves up to flushChunk queued subscriptions into buf; if more are left
// it wakes another flusher to share them.
func (f *flusher) next(buf []*Subscription) []*Subscription {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(flushChunk, len(f.subs)-f.head)
	buf = append(buf[:0], f.subs[f.head:f.head+n]...)
	clear(f.subs[f.head : f.head+n])
	f.head += n
	switch {
	case f.head == len(f.subs):
		f.subs, f.head = f.subs[:0], 0
	case f.head > len(f.subs)/2: // keep the list from creeping forward
		f.subs, f.head = f.subs[:copy(f.subs, f.subs[f.head:])], 0
		f.signal()
	default:
		f.signal()
	}
	return buf
}

func (f *flusher) run() {
	var chunk []*Subscription
	for {
		select {
		case <-f.wake:
		case <-f.stop:
			return
		}
		for chunk = f.next(chunk); len(chunk) > 0; chunk = f.next(chunk) {
			var written, left int64
			for _, s := range chunk {
				s.queued.Store(false) // an event published from now on queues it again
				n, l := s.flushDirect()
				written += int64(n)
				if l {
					left++
				}
			}
			f.written.Add(written)
			f.left.Add(left)
			clear(chunk)
		}
	}
}

func (f *flusher) close() {
	close(f.stop)
	f.wg.Wait()
}

// attach makes the broker's flushers write s's events to w (a hijacked socket)
// while w is idle. Serve calls it before reading s.
func (s *Subscription) attach(w *Writer) {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.ended || b.closed {
		return
	}
	if b.flush == nil {
		b.flush = newFlusher(runtime.GOMAXPROCS(0), &b.directWritten, &b.directLeft)
	}
	s.sink.Store(w)
}

// detach ends attach: once it returns no flusher touches w. Serve calls it
// before it returns.
func (s *Subscription) detach(w *Writer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.detached = true
	s.sink.Store(nil)
}

// notify tells whoever serves s that events wait: the flushers if s is
// attached, else Serve's goroutine. b.mu is held.
func (s *Subscription) notify() {
	if s.sink.Load() == nil {
		s.signal()
		return
	}
	if s.queued.CompareAndSwap(false, true) {
		s.b.dirty = append(s.b.dirty, s)
	}
}

// handOff gives the subscriptions notify marked to the flushers. b.mu is held.
func (b *Broker) handOff() {
	if len(b.dirty) == 0 {
		return
	}
	if b.flush == nil { // closed: nobody is attached any more
		for _, s := range b.dirty {
			s.queued.Store(false)
			s.signal()
		}
	} else {
		b.flush.add(b.dirty)
	}
	clear(b.dirty)
	b.dirty = b.dirty[:0]
}

// flushDirect writes s's waiting events to its Writer without blocking, or
// leaves them (and what it could not write) to Serve, which it wakes. It
// returns how many events it wrote and whether a full socket left some to Serve.
func (s *Subscription) flushDirect() (written int, left bool) {
	w := s.sink.Load()
	if w == nil {
		return 0, false // Serve has finished, or not started: it takes by itself
	}
	if !w.mu.TryLock() {
		s.signal() // Serve is writing: it looks again when done
		return 0, false
	}
	defer w.mu.Unlock()
	if w.detached {
		return 0, false
	}
	if w.err != nil || len(w.pending) > 0 || len(w.backlog) > 0 {
		s.signal()
		return 0, false
	}
	events := s.take(w.batch)
	w.batch = events
	defer clear(events)
	for i, e := range events {
		if s.fatal() != nil {
			return written, false // dropped or unsubscribed: Serve sees Done
		}
		if e.frame == nil { // an invalid event: Serve's Send refuses it
			w.backlog = append(w.backlog, events[i:]...)
			s.signal()
			return written, false
		}
		n, err := w.raw.try(e.frame)
		if err != nil {
			w.err = fmt.Errorf("sse: write: %w", err)
			s.signal()
			return written, false
		}
		if n < len(e.frame) {
			w.pending = append(w.pending, e.frame[n:]...)
			w.backlog = append(w.backlog, events[i+1:]...)
			s.signal()
			return written, true
		}
		written++
	}
	return written, false
}

// catchUp writes, for Serve, what the flushers left: the rest of a frame, then
// the events after it. w.mu is held.
func (w *Writer) catchUp(sub *Subscription) error {
	if w.err != nil {
		return w.err
	}
	if len(w.pending) > 0 {
		err := w.writeRaw(w.pending)
		w.pending = keep(w.pending)
		if err != nil {
			return err
		}
	}
	if len(w.backlog) > 0 {
		err := sendTaken(w, sub, w.backlog)
		clear(w.backlog)
		w.backlog = w.backlog[:0]
		return err
	}
	return nil
}

// keep empties b for reuse, unless it grew large.
func keep(b []byte) []byte {
	if cap(b) > maxKeptBuffer {
		return nil
	}
	return b[:0]
}

// writeRaw writes b to the socket: without blocking if it can, otherwise the
// rest under a deadline of w.timeout, which it clears again (so the flushers'
// non-blocking writes never meet a passed deadline). A failure is sticky.
func (w *Writer) writeRaw(b []byte) error {
	n, err := w.raw.try(b)
	if err == nil && n < len(b) {
		err = w.writeBlocking(b[n:])
	}
	if err != nil && w.err == nil {
		w.err = fmt.Errorf("sse: write: %w", err)
	}
	return w.err
}

func (w *Writer) writeBlocking(b []byte) error {
	if w.timeout > 0 {
		if err := w.conn.SetWriteDeadline(time.Now().Add(w.timeout)); err != nil {
			return err
		}
	}
	if _, err := w.conn.Write(b); err != nil {
		return err
	}
	if w.timeout > 0 {
		return w.conn.SetWriteDeadline(time.Time{})
	}
	return nil
}
