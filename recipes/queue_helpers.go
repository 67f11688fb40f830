package recipes

import (
	"context"
	"errors"
	"time"

	"github.com/go-zookeeper/zk"
)

// Helpers shared by the barrier, double-barrier and queue recipes.

// failedOp returns the index of the operation that failed a Multi (the one whose
// error is err), or -1.
func failedOp(mr []zk.MultiResponse, err error) int {
	for i, r := range mr {
		if r.Error != nil && errors.Is(r.Error, err) {
			return i
		}
	}
	return -1
}

// endImplicit ends an implicit lease that ends up holding nothing.
func endImplicit(l *Lease) {
	if l != nil && l.Implicit {
		l.end(ErrLeaseRevoked)
	}
}

// settle runs op on ep until it succeeds, fails for good, or ep's session is
// gone (then ephemeral nodes are gone too and nothing is left to undo). Through a
// suspension it waits for the session to come back while ctx lives; if ctx ends
// first while the session may still live, it goes on in the background until the
// session is connected again or lost, so that an ephemeral node meant to go (a
// claim marker, a dblParticipant) never outlives its holder for long.
func settle(ctx context.Context, ep *epoch, op func(ctx context.Context) error) error {
	for {
		err := op(ctx)
		switch {
		case err == nil, errors.Is(err, ErrSessionLost), errors.Is(err, ErrClosed):
			return nil
		case !errors.Is(err, ErrUnavailable):
			return err
		case ctx.Err() == nil:
			if waitConnected(ctx, ep) != nil && ep.isLost() {
				return nil
			}
			continue
		}
		go func() {
			for {
				if waitConnected(context.Background(), ep) != nil {
					return // lost: the server removed the session's ephemerals
				}
				bg, cancel := context.WithTimeout(context.Background(), ep.s.cfg.OpTimeout)
				err := op(bg)
				cancel()
				if err == nil || !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost) {
					return
				}
			}
		}()
		return err
	}
}

// deadline is the end of a bounded wait: wait <= 0 means "try once".
type waitDeadline struct {
	wait  time.Duration
	timer *time.Timer
	C     <-chan time.Time // nil (blocks forever) when wait <= 0
}

func newDeadline(wait time.Duration) *waitDeadline {
	d := &waitDeadline{wait: wait}
	if wait > 0 {
		d.timer = time.NewTimer(wait)
		d.C = d.timer.C
	}
	return d
}

// expired reports whether the wait is over (always true for "try once").
func (d *waitDeadline) expired() bool {
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

func (d *waitDeadline) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
}

var expiredC = func() <-chan time.Time {
	c := make(chan time.Time)
	close(c)
	return c
}()

// awaitSession blocks until the session state changes, the deadline passes, or
// ctx ends; it reports false when the caller should stop trying.
func awaitSession(ctx context.Context, changed <-chan struct{}, d *waitDeadline) bool {
	if d.expired() {
		return false
	}
	select {
	case <-changed:
		return true
	case <-d.C:
		d.C = expiredC
		return false
	case <-ctx.Done():
		return false
	}
}

// waitOutSession tells whether err comes from the session (suspended, or lost
// and being replaced) and, when it does, waits for the session to change within
// d: true means try again.
func waitOutSession(ctx context.Context, err error, changed <-chan struct{}, d *waitDeadline) bool {
	return (errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost)) && ctx.Err() == nil &&
		awaitSession(ctx, changed, d)
}
