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
func Serve(ctx context.Context, w *Writer, sub *Subscription, heartbeat time.Duration) error {
	defer sub.Close()
	defer w.finish()
	if heartbeat <= 0 {
		heartbeat = DefaultHeartbeat
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()

	ch := sub.channel() // nil unless Events was called: then read from it
	var batch []Event
	send := func(events []Event) error {
		for _, e := range events {
			if err := sub.fatal(); err != nil {
				return err // dropped or unsubscribed: what is left is stale
			}
			if err := w.Send(e); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := w.Comment(heartbeatText); err != nil {
				return err
			}
		case <-sub.ready:
			if ch = sub.channel(); ch != nil {
				continue
			}
			batch = sub.take(batch)
			if err := send(batch); err != nil {
				return err
			}
		case e, ok := <-ch:
			if !ok {
				return sub.fatal() // closed after the end; all drained
			}
			if err := sub.fatal(); err != nil {
				return err
			}
			if err := w.Send(e); err != nil {
				return err
			}
		case <-sub.done:
			if err := sub.fatal(); err != nil {
				return err
			}
			// The broker closed: deliver what was published before.
			if ch != nil {
				for e := range ch {
					if err := w.Send(e); err != nil {
						return err
					}
				}
				return nil
			}
			return send(sub.take(batch))
		}
	}
}
