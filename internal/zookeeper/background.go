package zookeeper

import (
	"context"
	"fmt"
)

// DefaultBackgroundReads is how many background reads (Session.Background) run
// at once when Config.BackgroundReads is not set.
const DefaultBackgroundReads = 64

// Background runs read, a read the sidecar makes for itself rather than for a
// client waiting on it (a follower reading its state at its start, after a watch
// fired or under a new session), once one of the Session's background slots is
// free: at most Config.BackgroundReads run at once. A burst of them, such as the
// whole picture's first read of 10,000 things, then waits here, a few calls at a
// time on the connection, instead of in the connection's queue, where every
// other call would wait behind all of it: clients' own calls, and the
// heartbeat's read, whose answer keeps the session out of doubt (a suspension
// then lasts until 2/3 of the session timeout after it: see heartbeats). read's
// own calls are bounded as any call is. When ctx ends before a slot is free,
// read is not run and the error wraps ErrUnavailable and ctx's error.
func (s *Session) Background(ctx context.Context, read func() error) error {
	select {
	case s.background <- struct{}{}:
	default:
		s.metrics.backgroundWaiting.Inc()
		select {
		case s.background <- struct{}{}:
			s.metrics.backgroundWaiting.Dec()
		case <-ctx.Done():
			s.metrics.backgroundWaiting.Dec()
			return fmt.Errorf("%w: waiting for a background read slot: %w", ErrUnavailable, ctx.Err())
		}
	}
	defer func() { <-s.background }()
	return read()
}
