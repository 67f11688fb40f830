package zookeeper

import (
	"strings"
	"time"
)

// Saying out loud that ZooKeeper cannot be reached. go-zookeeper retries a
// refused or failing connection about once a second and tells only its debug
// log; a wrong or dead --zk would then look like a sidecar that serves. The
// Session instead warns, at the default level, once the session has been
// without a connection for firstWarnAfter and a connection has failed: the
// servers, how long, how many failures, the last error and its server. It
// warns again after twice the interval, up to once every maxWarnEvery, and
// says at info level when the connection is back.

const (
	// firstWarnAfter is how long the session is without a connection before
	// the first warning: a reconnect to another server of the ensemble takes
	// less and warns of nothing.
	firstWarnAfter = 2 * time.Second
	// maxWarnEvery bounds the interval between warnings.
	maxWarnEvery = time.Minute
)

// unreachableWarnings is the schedule of the warnings of one time without a
// connection (the one that began at downSince). Guarded by Session.mu.
type unreachableWarnings struct {
	downSince time.Time     // the time without a connection they are about
	next      time.Time     // when the next warning is due
	every     time.Duration // the interval before the one after it
	warned    int           // warnings given
}

// warnUnreachable warns, when one is due at now, that the session has had no
// connection since s.downSince, and says when the connection is back after a
// warning. The heartbeats call it at every tick.
func (s *Session) warnUnreachable(now time.Time) {
	s.mu.Lock()
	st, down, w := s.state, s.downSince, &s.warnings
	if st == StateClosed {
		s.mu.Unlock()
		return
	}
	if down != w.downSince {
		// Connected again, or without a connection since another moment: a
		// new schedule, after telling the end of the last one.
		warned, since := w.warned, w.downSince
		*w = unreachableWarnings{downSince: down, next: down.Add(firstWarnAfter), every: firstWarnAfter}
		if warned > 0 && st == StateConnected {
			s.mu.Unlock()
			s.log.Info("zookeeper reachable again", "after", now.Sub(since).Round(time.Millisecond).String(),
				"server", s.Info().Server)
			return
		}
	}
	if down.IsZero() || now.Before(w.next) {
		s.mu.Unlock()
		return
	}
	last, fails := s.lastConnErr.failures()
	if last == nil {
		// Without a connection, but nothing has failed yet (a dial or a
		// handshake under way): wait for its outcome.
		s.mu.Unlock()
		return
	}
	w.every = min(2*w.every, maxWarnEvery)
	w.next = now.Add(w.every)
	w.warned++
	every := w.every
	s.mu.Unlock()
	s.log.Warn("zookeeper unreachable", "servers", strings.Join(s.cfg.Servers, ","), "state", st.String(),
		"for", now.Sub(down).Round(time.Second).String(), "failures", fails,
		"lastError", last.err, "lastErrorOn", last.server, "lastErrorAt", last.at,
		"nextWarningIn", every.String())
}
