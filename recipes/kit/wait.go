package kit

import (
	"context"
	"errors"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Deadline is the end of a bounded wait: a wait <= 0 means "try once". Stop it
// when done.
type Deadline struct {
	wait  time.Duration
	timer *time.Timer
	// C fires when the wait is over; nil (blocks forever) when wait <= 0. After
	// it fired once, Expired keeps reporting it.
	C <-chan time.Time
}

// NewDeadline starts a wait of d.
func NewDeadline(d time.Duration) *Deadline {
	dl := &Deadline{wait: d}
	if d > 0 {
		dl.timer = time.NewTimer(d)
		dl.C = dl.timer.C
	}
	return dl
}

// Expired reports whether the wait is over (always true for "try once").
func (d *Deadline) Expired() bool {
	if d.wait <= 0 {
		return true
	}
	select {
	case <-d.C:
		d.C = expiredC // a timer fires once; keep reporting it
		return true
	default:
		return false
	}
}

// Fired records that C fired (read by the caller's select).
func (d *Deadline) Fired() { d.C = expiredC }

// Stop releases the timer.
func (d *Deadline) Stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

var expiredC = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// AwaitSession blocks until the session state changes, the deadline passes, or
// ctx ends; it reports false when the caller should stop trying.
func AwaitSession(ctx context.Context, changed <-chan struct{}, d *Deadline) bool {
	if d.Expired() {
		return false
	}
	select {
	case <-changed:
		return true
	case <-d.C:
		d.Fired()
		return false
	case <-ctx.Done():
		return false
	}
}

// WaitOutSession tells whether err comes from the session (suspended, or lost
// and being replaced) and, when it does, waits for the session to change within
// d: true means try again.
func WaitOutSession(ctx context.Context, err error, changed <-chan struct{}, d *Deadline) bool {
	return (errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost)) && ctx.Err() == nil &&
		AwaitSession(ctx, changed, d)
}

// AwaitGone waits until node p does not exist: true once it is gone (or never
// was), false when d is over first. It watches p, so it answers within a round
// trip of the delete, and it rides out a suspension or a new session within d.
func AwaitGone(ctx context.Context, s *zookeeper.Session, p string, d *Deadline) (bool, error) {
	for {
		changed := s.Changed()
		ep, err := s.Current()
		var exists bool
		var watch <-chan zookeeper.Event
		if err == nil {
			exists, _, watch, err = ep.ExistsW(ctx, p)
		}
		if err != nil {
			if WaitOutSession(ctx, err, changed, d) {
				continue
			}
			return false, err
		}
		if !exists {
			return true, nil
		}
		if d.Expired() {
			return false, nil
		}
		select {
		case <-watch:
		case <-d.C:
			d.Fired()
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		case <-ep.Lost():
		}
	}
}

// WaitSeconds registers on f a histogram of waits' durations in seconds (an
// acquisition, a barrier's wait), by labels: the buckets every recipe's wait
// shares, from 0.5 ms up, four times wider each, the last at about 2 minutes.
func WaitSeconds(f promauto.Factory, name, help string, labels ...string) *prometheus.HistogramVec {
	return f.NewHistogramVec(prometheus.HistogramOpts{
		Name: name, Help: help, Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, labels)
}
