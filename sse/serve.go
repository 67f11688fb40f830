package sse

import (
	"context"
	"time"
)

// DefaultHeartbeat is the heartbeat Serve uses when given heartbeat <= 0.
const DefaultHeartbeat = 15 * time.Second

// heartbeatText is the comment Serve writes every heartbeat.
const heartbeatText = "ping"

// Serve pumps sub into w until ctx ends, the subscription ends, or a write
// fails, writing a comment (": ping") every heartbeat (heartbeat <= 0 means
// DefaultHeartbeat). When the subscription ends with ErrClosed it first
// writes the events already buffered, so an event published just before the
// broker closes reaches the client. It returns nil when ctx ends or the
// broker closed, the subscription's error (ErrSlowSubscriber,
// ErrUnsubscribed) if it ended otherwise, or the write error. Serve closes
// sub before returning, and unless a write failed it gives the server a
// fresh write deadline to end the response cleanly.
//
// Over a hijacked socket ([Hijack]) the broker's flushers write most events
// directly without waking Serve's goroutine; Serve writes what they leave it (a
// full socket buffer, a write of its own under way) before anything newer, so
// the stream carries the same events in the same order either way.
func Serve(ctx context.Context, w *Writer, sub *Subscription, heartbeat time.Duration) error {
	defer sub.Close()
	defer w.finish()
	if w.raw != nil {
		sub.attach(w)
		defer sub.detach(w)
	}
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeat
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()

	ch := sub.channel() // nil unless Events was called: then read from it
	for {
		var err error
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			err = w.locked(sub, func() error { return w.Comment(heartbeatText) })
		case <-sub.ready:
			if ch = sub.channel(); ch != nil {
				continue
			}
			err = w.locked(sub, func() error {
				w.batch = sub.take(w.batch) // shared with the flushers, under w.mu
				return sendTaken(w, sub, w.batch)
			})
		case e, ok := <-ch:
			if !ok {
				return sub.fatal() // closed after the end; all drained
			}
			if err = sub.fatal(); err == nil {
				err = w.locked(sub, func() error { return w.send(e) })
			}
		case <-sub.done:
			return w.locked(sub, func() error { return drainEnded(w, sub, ch, w.batch) })
		}
		if err != nil {
			return err
		}
	}
}

// locked runs write holding w against the flushers, after writing what they
// left.
func (w *Writer) locked(sub *Subscription, write func() error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := sub.fatal(); err != nil {
		return err
	}
	if err := w.catchUp(sub); err != nil {
		return err
	}
	return write()
}

// sendTaken writes events taken from sub, unless sub has been dropped or
// unsubscribed meanwhile: then what is left is stale, and it returns why.
func sendTaken(w *Writer, sub *Subscription, events []Event) error {
	for _, e := range events {
		if err := sub.fatal(); err != nil {
			return err
		}
		if err := w.send(e); err != nil {
			return err
		}
	}
	return nil
}

// drainEnded ends Serve once sub has ended: when the broker closed, it writes
// what was published before (from ch if Events was called, else from sub's
// buffer, reusing batch); otherwise it returns why sub ended.
func drainEnded(w *Writer, sub *Subscription, ch chan Event, batch []Event) error {
	if err := sub.fatal(); err != nil {
		return err
	}
	if ch != nil {
		for e := range ch {
			if err := w.send(e); err != nil {
				return err
			}
		}
		return nil
	}
	return sendTaken(w, sub, sub.take(batch))
}
