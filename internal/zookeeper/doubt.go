package zookeeper

import (
	"fmt"
	"time"
)

// Doubt: suspension is not loss (see the package doc, "Suspension is not
// loss"). While the connection is suspended, ZooKeeper cannot have expired the
// session before LastAnswered plus the session timeout, so what was granted
// under it stands. The Session never abandons a session ZooKeeper may still
// hold: it keeps reconnecting with the same id and password until ZooKeeper
// gives the session back (the same Epoch, connected again: "reconnected") or
// declares it expired (zk.StateExpired: the Epoch is lost and a new session
// is made).
//
// What it does, once a suspension lasts until CouldHaveExpiredAt (two thirds
// of the timeout after ZooKeeper last answered), is declare the epoch in
// doubt: Doubted closes (the leases report what they hold lost then, and
// delete its nodes as soon as the same session is connected again, so that
// nobody waits for an expiry), InDoubt turns true and Changed closes
// (followers stop vouching for the last state they read). A loss is thus
// reported a third of the timeout before the ensemble can hand anything of
// the session to another client, as when the Session abandoned it at 9/10.

// Doubted returns a channel closed the next time ep's session is declared in
// doubt (a suspension lasting until CouldHaveExpiredAt); every doubt closes
// the channel that Doubted returned before it, and later calls get a new one.
// A grant made under ep before that moment is to be reported lost then; one
// made after the session came back stands until the next doubt (or loss).
func (ep *Epoch) Doubted() <-chan struct{} {
	ep.s.mu.Lock()
	defer ep.s.mu.Unlock()
	return ep.doubt
}

// Doubts counts the times ep's session was declared in doubt.
func (ep *Epoch) Doubts() uint64 { return ep.doubts.Load() }

// InDoubt tells whether the current suspension has lasted until the session
// could have expired (its epoch's CouldHaveExpiredAt): the last state read is
// no longer vouched for. False while connected, connecting, lost or closed,
// and during the first part of a suspension.
func (s *Session) InDoubt() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inDoubt
}

// checkDoubt declares ep in doubt when it is the suspended epoch and its
// suspension has lasted until CouldHaveExpiredAt; once per suspension.
func (s *Session) checkDoubt(ep *Epoch, now time.Time) {
	if now.Before(ep.CouldHaveExpiredAt()) {
		return
	}
	s.mu.Lock()
	if ep != s.ep || s.state != StateSuspended || s.inDoubt {
		s.mu.Unlock()
		return
	}
	s.inDoubt = true
	ep.doubts.Add(1)
	close(ep.doubt)
	ep.doubt = make(chan struct{})
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.metrics.doubts.Inc()
	s.log.Warn("zookeeper session in doubt: no answer for 2/3 of the session timeout; what it holds is reported lost, and the same session is tried again",
		"session", fmt.Sprintf("0x%x", ep.id.Load()), "lastAnswered", ep.LastAnswered().UTC().Format(time.RFC3339Nano))
}
