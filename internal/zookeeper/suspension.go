package zookeeper

import "time"

// Suspension tells whether the session is suspended (its connection lost, the
// session perhaps still alive on the ensemble) and since when; ok is false
// while it is not (connected, connecting, lost, closed).
func (s *Session) Suspension() (since time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.suspendedAt, s.state == StateSuspended
}

// LastAnswered is when the newest call that ZooKeeper answered on ep's
// session was sent: the ensemble heard from this session then or later, so it
// cannot expire the session before LastAnswered plus the session timeout.
func (ep *Epoch) LastAnswered() time.Time { return time.Unix(0, ep.lastOK.Load()) }

// CouldHaveExpiredAt is the instant from which the sidecar treats ep's
// session as possibly expired while it cannot reach ZooKeeper: two thirds of
// the negotiated session timeout after LastAnswered, well before the ensemble
// can have expired it. Holds are kept through a suspension until then.
func (ep *Epoch) CouldHaveExpiredAt() time.Time {
	return ep.LastAnswered().Add(ep.SessionTimeout() * 2 / 3)
}
