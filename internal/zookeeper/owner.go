package zookeeper

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/go-zookeeper/zk"
)

// One session, one process (Config.Incarnation). A ZooKeeper session belongs
// to whoever presents its id and password: the server hands it to the newest
// connection and drops the one before. Two processes that both hold a
// session's password (a state file copied elsewhere) would take it from each
// other at every reconnect, for ever, each go-zookeeper client reconnecting
// at once. So each process records an incarnation in an ephemeral node of the
// session, Dir/0x<id>: written when the session is made or resumed (the
// newest process's record wins), and read again at every reconnect of the same
// session before the session counts as connected. A reconnect that finds
// another record has taken the session back from the process that wrote it:
// the connection is cut at once beneath go-zookeeper (as Detach cuts it, so no
// closeSession and no new connection), nothing else is sent,
// Incarnation.TakenOver is told, and the Session detaches itself (no new
// session is made in its place). The other process, on its own reconnect,
// finds its record and goes on. The process that stays loses the session
// twice at most: to the other's take-over, and once more when its own
// reconnect took the session back before the other's record was written
// (the other's claim is then made again, on its next connection).
// Between reconnects the record is watched: on an ensemble, the connection of
// the process whose session was taken through another server is not always
// dropped at once, and the record's change tells it then. A record deleted by
// another hand is written again.

// Incarnation is this process's claim on its session (Config.Incarnation).
type Incarnation struct {
	// Dir is the container node under which each session's record is kept,
	// named by the session id ("0x" and hex).
	Dir string
	// Record is this process's record, written on every session it makes or
	// resumes and compared byte for byte at every reconnect.
	Record []byte
	// TakenOver is called once, on a goroutine of the Session, with found,
	// another process's record, read from the node of the session id (at a
	// reconnect, or after its watch fired): the connection is already cut,
	// and the Session then detaches itself (Detach: no closeSession, no new
	// session, ever). It must not block.
	TakenOver func(id int64, found []byte)
}

// IncarnationPath is the node that holds the record of session id under dir.
func IncarnationPath(dir string, id int64) string {
	return path.Join(dir, fmt.Sprintf("0x%x", id))
}

// claiming tells whether the Session claims its sessions.
func (s *Session) claiming() bool { return s.cfg.Incarnation != nil }

// WaitClaimed waits until this process's record is written for the current
// session (at once without Config.Incarnation): nil then; ErrClosed once the
// Session is closed; ErrUnavailable wrapping ctx's error if ctx ends first. A
// session lost meanwhile is waited past: the next one is claimed in turn.
func (s *Session) WaitClaimed(ctx context.Context) error {
	if !s.claiming() {
		return nil
	}
	for {
		ep, err := s.WaitCurrent(ctx)
		if err != nil {
			return err
		}
		select {
		case <-ep.claimed:
			return nil
		case <-ep.lost:
		case <-s.closing:
			return ErrClosed
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}

// hasSessionLocked applies go-zookeeper's StateHasSession to ep: a new
// connection of the session. A reconnect of a session claimed by this process
// is verified before it counts as connected. s.mu is held.
func (s *Session) hasSessionLocked(ep *Epoch) {
	ep.hasSession = true
	ep.conns++
	ep.verified = !s.claiming() || !ep.landed.Load()
	if !ep.verified {
		gen := ep.conns
		s.Go(func() { s.verify(ep, gen) })
	}
	if ep.authed && ep.verified {
		s.connectedLocked(ep)
	}
}

// verifiedLocked applies the verification of ep's connection gen: it counts
// as connected, if it is still the connection. s.mu is held.
func (s *Session) verifiedLocked(ep *Epoch, gen uint64) {
	if gen != ep.conns || !ep.hasSession {
		return // a connection since dropped: the next one is verified in turn
	}
	ep.verified = true
	if ep.authed {
		s.connectedLocked(ep)
	}
}

// verify reads the record of ep's session on its connection gen (not yet
// counted as connected, so nothing else is sent on it), after a sync so that
// a write made through another server is seen. Its own record: the
// connection counts as connected. Another: the connection is cut and
// TakenOver told. No record (deleted by another hand): connected, and the
// record written again. A read that fails with the connection waits for the
// next connection's verification; one that fails otherwise is logged and
// lets the connection count (as before records were kept).
func (s *Session) verify(ep *Epoch, gen uint64) {
	inc := s.cfg.Incarnation
	p := IncarnationPath(inc.Dir, ep.id.Load())
	_, _ = ep.conn.Sync(inc.Dir)  // its error is the Get's too, or of a parent gone with its last child
	got, _, err := ep.conn.Get(p) // (go-zookeeper sets the record's watch again on every connection itself)
	switch {
	case err == nil && !s.mine(ep, p, got):
		return
	case err == nil:
	case errors.Is(err, zk.ErrNoNode):
		s.reclaim(ep, p)
	case errors.Is(mapError(err), ErrUnavailable), errors.Is(err, zk.ErrSessionExpired):
		return
	default:
		s.log.Warn("zookeeper: the session's record could not be read at a reconnect: going on without", "node", p, "err", err)
	}
	s.enqueueEvent(queuedEvent{ep: ep, verified: gen})
}

// claim writes this process's record for ep's session (its first connect),
// until it is written or ep is lost: over the record of a predecessor (whose
// session this one resumed), or as a new ephemeral node. Written, the record
// is verified at every later reconnect; WaitClaimed returns.
func (s *Session) claim(ep *Epoch) {
	inc := s.cfg.Incarnation
	pause := 100 * time.Millisecond
	for failed := 0; ; failed++ {
		err := s.writeRecord(ep, inc)
		if err == nil {
			ep.landed.Store(true)
			ep.claimOnce.Do(func() { close(ep.claimed) })
			s.recheck(ep) // arms the record's watch
			return
		}
		if ep.IsLost() {
			return
		}
		if errors.Is(err, ErrUnavailable) {
			if ep.WaitConnected(context.Background()) != nil {
				return
			}
			continue
		}
		if failed%10 == 0 {
			s.log.Error("zookeeper: this process's record of its session could not be written; retrying (the sidecar is not ready meanwhile)",
				"node", IncarnationPath(inc.Dir, ep.ID()), "err", err)
		}
		select {
		case <-ep.lost:
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// writeRecord sets the record of ep's session, or creates its node (and the
// container above it).
func (s *Session) writeRecord(ep *Epoch, inc *Incarnation) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	defer cancel()
	p := IncarnationPath(inc.Dir, ep.ID())
	for {
		_, err := ep.Set(ctx, p, inc.Record, -1)
		if !errors.Is(err, ErrNoNode) {
			return err
		}
		_, err = ep.CreateOwned(ctx, p, inc.Record, true)
		if !errors.Is(err, ErrNodeExists) {
			return err
		}
	}
}

// mine tells whether got, read from p, is this process's record. When it is
// another's, the session was taken over: ep's connection is cut at once
// beneath go-zookeeper (nothing more is sent on it), TakenOver is told once,
// and the Session detaches itself.
func (s *Session) mine(ep *Epoch, p string, got []byte) bool {
	inc := s.cfg.Incarnation
	if bytes.Equal(got, inc.Record) {
		return true
	}
	ep.hs.Detach() // before anything more is sent: the session is the other process's
	ep.takenOnce.Do(func() {
		s.log.Warn("zookeeper session taken over by another process: its record is in the session's node; this process no longer uses the session",
			"session", fmt.Sprintf("0x%x", ep.id.Load()), "node", p, "record", string(got))
		inc.TakenOver(ep.id.Load(), got)
		go s.Detach() // not a task: Detach waits for the tasks, this one among them
	})
	return false
}

// reclaim writes the record of ep's session again, after it was found
// deleted (by another hand: it is an ephemeral node of the session).
func (s *Session) reclaim(ep *Epoch, p string) {
	if ep.landed.Swap(false) {
		s.log.Warn("zookeeper: the session's record was deleted by another hand: written again", "node", p)
		s.Go(func() { s.claim(ep) })
	}
}

// recordEvent is the Session's event callback for a watch's event on the
// record of ep's session, once written (it never blocks): the record is read
// again, and its watch armed again. A change of the record while this
// process's connection stays up (a copy took the session over through
// another server of the ensemble, where this connection is not dropped at
// once) is told so, without waiting for a reconnect. Other events: false.
func (s *Session) recordEvent(ep *Epoch, ev zk.Event) bool {
	inc := s.cfg.Incarnation
	if inc == nil || !ep.landed.Load() || ev.Path != IncarnationPath(inc.Dir, ep.id.Load()) {
		return false
	}
	s.Go(func() { s.recheck(ep) })
	return true
}

// recheck reads the record of ep's session with a watch, while connected:
// another's record is a take-over (mine), none is written again. Failing with
// the connection, it leaves the record to the next connection's verify.
func (s *Session) recheck(ep *Epoch) {
	p := IncarnationPath(s.cfg.Incarnation.Dir, ep.ID())
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpTimeout)
	defer cancel()
	got, _, _, err := ep.GetW(ctx, p)
	switch {
	case err == nil:
		s.mine(ep, p, got)
	case errors.Is(err, ErrNoNode):
		s.reclaim(ep, p)
	}
}
