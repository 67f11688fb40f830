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

	p := pump{w: w, sub: sub, ch: sub.channel()} // ch: nil unless Events was called
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if err := w.Comment(heartbeatText); err != nil {
				return err
			}
		case <-sub.ready:
			if p.ch = sub.channel(); p.ch != nil {
				continue
			}
			p.batch = sub.take(p.batch)
			if err := p.send(p.batch); err != nil {
				return err
			}
		case e, ok := <-p.ch:
			if !ok {
				return sub.fatal() // closed after the end; all drained
			}
			if err := p.sendOne(e); err != nil {
				return err
			}
		case <-sub.done:
			return p.drain()
		}
	}
}

// pump moves one subscription's events to one writer.
type pump struct {
	w     *Writer
	sub   *Subscription
	ch    <-chan Event
	batch []Event
}

// send writes events unless the subscription was dropped or unsubscribed (what
// is left is stale then).
func (p *pump) send(events []Event) error {
	for _, e := range events {
		if err := p.sendOne(e); err != nil {
			return err
		}
	}
	return nil
}

func (p *pump) sendOne(e Event) error {
	if err := p.sub.fatal(); err != nil {
		return err
	}
	return p.w.Send(e)
}

// drain delivers, after the broker closed, what was published before.
func (p *pump) drain() error {
	if err := p.sub.fatal(); err != nil {
		return err
	}
	if p.ch != nil {
		for e := range p.ch {
			if err := p.w.Send(e); err != nil {
				return err
			}
		}
		return nil
	}
	return p.send(p.sub.take(p.batch))
}
