package zookeeper

import (
	"context"
	"fmt"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/transport"
)

// Resuming a session (see the package doc, "Resuming a session"): the
// first Epoch's transport.Handshake presents Config.Resume's session until the
// server answers, and every Epoch's reads each answer's session id, password
// and timeout; Session.resume knows the outcome.

// refusedFirst tells whether ep presented Config.Resume, was refused, and has
// not been connected since: go-zookeeper then reports the session expired and
// makes a new one on the same connection, which is no loss of anything.
func (ep *Epoch) refusedFirst() bool { return ep.hs.Refused() && ep.connects.Load() == 0 }

// Resumable returns the id, password and negotiated timeout the server last
// gave ep's session, to be saved for a successor; false until the server has
// answered. The password is a copy.
func (ep *Epoch) Resumable() (transport.Resumable, bool) { return ep.hs.Answer() }

// resumedAt is when ep took over Config.Resume's session; zero if it did not.
func (ep *Epoch) resumedAt() time.Time { return ep.hs.ResumedAt() }

// WaitResume waits until the server has answered the session Config.Resume
// named: nil when it gave the session back (this Session's first epoch is
// that session, its ephemeral nodes owned; it counts as connected once
// Current says so), transport.ErrResumeTooLate when it did not (the Session
// goes on with a new session). transport.ErrNoResume without Config.Resume,
// ErrClosed if the Session ends first, ErrUnavailable wrapping ctx's error if
// ctx does.
func (s *Session) WaitResume(ctx context.Context) error {
	select {
	case <-s.resume.Done():
		return s.resume.Err()
	case <-s.closing:
		return ErrClosed
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
}

// Detach ends the Session without ending its ZooKeeper session, for a
// successor that resumes it (Config.Resume with the current epoch's
// Resumable). First the connection is cut beneath go-zookeeper and no new one
// is made, so nothing more reaches the server (go-zookeeper's Close would send
// closeSession); then everything stops as in Close, and Detach returns once
// every goroutine has ended. The session and its ephemeral nodes live on until
// the server expires it (its timeout after the last contact) or a successor
// resumes it; its watches end with the connection. Detach after Close (or
// Close after Detach) does nothing.
func (s *Session) Detach() { s.end(true) }
