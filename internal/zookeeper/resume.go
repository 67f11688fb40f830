package zookeeper

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Resuming a session (see docs/ARCHITECTURE.md, "Resuming a session").
//
// ZooKeeper lets a client reconnect to a live session from any connection to
// any server of the ensemble by presenting the session's id and password in its
// ConnectRequest; go-zookeeper has no option for it, but every connection it
// makes comes from the dialer. The Session wraps each connection: the first
// write (go-zookeeper's ConnectRequest, one write) may be rewritten to name the
// session of Config.Resume, and the first answer (the server's
// ConnectResponse) is read as it passes to learn the session's id, password and
// timeout. After those two, the wrapper passes every byte through untouched.

// Resumable is what a successor needs to take over a ZooKeeper session: its id
// and password, and the timeout the server negotiated for it. The password is a
// secret: whoever holds it owns the session and its ephemeral nodes.
type Resumable struct {
	ID       int64
	Password []byte
	// Timeout is the negotiated session timeout: the session outlives its
	// connection's end by about this long. When resuming, the request asks
	// for Config.Timeout again.
	Timeout time.Duration
}

// ErrResumeTooLate means the server did not give back the session that
// Config.Resume named (it expired, or the password is wrong): the Session goes
// on with a new session, and nothing of the old one is owned.
var ErrResumeTooLate = errors.New("too late to resume the ZooKeeper session")

// ErrNoResume is WaitResume's answer when Config.Resume was not set.
var ErrNoResume = errors.New("no ZooKeeper session to resume was configured")

var errDetached = errors.New("zookeeper: the session was detached, no new connection is made")

// The layout of ZooKeeper's ConnectRequest as go-zookeeper v1.0.4 writes it,
// in one write: int32 length of the rest, int32 protocolVersion, int64
// lastZxidSeen, int32 timeOut, int64 sessionId, int32 password length, the
// password, and (in clients that send it) one readOnly byte.
const (
	reqSessionAt = 4 + 4 + 8 + 4
	reqPasswdAt  = reqSessionAt + 8
)

// The layout of the ConnectResponse: int32 length of the rest (the body), then
// in the body int32 protocolVersion, int32 timeOut (ms), int64 sessionId, int32
// password length, the password, one readOnly byte (servers since 3.4).
// Offsets are in the body.
const (
	respTimeoutAt = 4
	respSessionAt = respTimeoutAt + 4
	respPasswdAt  = respSessionAt + 8
	// maxConnectResponse bounds what is buffered while looking for the answer.
	maxConnectResponse = 1024
)

// handshake is an Epoch's part in resuming: what it presents, what the server
// answered, and its newest connection (to cut it in Detach).
type handshake struct {
	mu sync.Mutex
	// resume is presented on every connection until the server answers one;
	// nil then, and for every epoch but a Session's first.
	resume *Resumable
	// refused: the server answered resume with another session (or none).
	refused bool
	// resumedAt is when the server gave back resume's session.
	resumedAt time.Time
	// answer is the server's newest answer that carried a session.
	answer Resumable
	known  bool
	// conn is the newest connection dialed (unwrapped); detached: no more.
	conn     net.Conn
	detached bool
}

// wrapDialer returns d with every connection it makes wrapped for ep's
// handshake. Once ep is detached it makes none.
func (ep *Epoch) wrapDialer(d zk.Dialer) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := d(network, address, timeout)
		if err != nil {
			return nil, err
		}
		if !ep.hs.adopt(c) {
			c.Close()
			return nil, errDetached
		}
		return ep.zxids.Wrap(&handshakeConn{Conn: c, ep: ep}), nil
	}
}

// adopt records c as the newest connection, closing the one before (go-zookeeper
// dials only once it is done with it, but leaves it open after an expired
// answer). False once detached.
func (h *handshake) adopt(c net.Conn) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.detached {
		return false
	}
	if h.conn != nil {
		h.conn.Close()
	}
	h.conn = c
	return true
}

// detach closes the newest connection and refuses every later one: nothing
// more, closeSession included, reaches the server.
func (h *handshake) detach() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.detached = true
	if h.conn != nil {
		h.conn.Close()
	}
}

// handshakeConn is one connection as go-zookeeper sees it. go-zookeeper writes
// the ConnectRequest and reads the ConnectResponse on its connecting goroutine
// before it starts the goroutines that write and read everything else, so the
// two flags need no lock.
type handshakeConn struct {
	net.Conn
	ep        *Epoch
	wrote     bool  // the ConnectRequest has gone out
	answered  bool  // the ConnectResponse has been read (or given up on)
	presented int64 // the session id this connection presented from Config.Resume; 0 none
	in        []byte
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if c.wrote {
		return c.Conn.Write(b)
	}
	c.wrote = true
	out, presented := c.ep.connectRequest(b)
	c.presented = presented
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

func (c *handshakeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.answered && n > 0 {
		c.in = append(c.in, b[:n]...)
		r, complete, perr := parseConnectResponse(c.in)
		if complete || perr != nil {
			c.answered, c.in = true, nil
			c.ep.connectAnswered(r, c.presented, perr)
		}
	}
	return n, err
}

// connectRequest returns what to write for go-zookeeper's ConnectRequest b: b
// itself, or, while ep still has Config.Resume to present, b naming that
// session, with the id presented.
func (ep *Epoch) connectRequest(b []byte) ([]byte, int64) {
	h := &ep.hs
	h.mu.Lock()
	r := h.resume
	h.mu.Unlock()
	if r == nil {
		return b, 0
	}
	out, err := rewriteConnectRequest(b, r)
	if err != nil {
		h.mu.Lock()
		h.resume, h.refused = nil, true
		h.mu.Unlock()
		ep.s.resumeDone(fmt.Errorf("%w: go-zookeeper's connect request is not the one this sidecar knows how to rewrite (%w)", ErrResumeTooLate, err))
		return b, 0
	}
	return out, r.ID
}

// connectAnswered records the server's answer on a connection that presented
// the session presented (0: go-zookeeper's own request).
func (ep *Epoch) connectAnswered(r Resumable, presented int64, perr error) {
	s, h := ep.s, &ep.hs
	if perr != nil {
		s.log.Error("zookeeper: the server's connect answer could not be read", "err", perr)
	}
	h.mu.Lock()
	if perr == nil && r.ID != 0 {
		h.answer, h.known = r, true
	}
	resumed := perr == nil && r.ID == presented
	if presented != 0 {
		h.resume = nil
		if resumed {
			h.resumedAt = time.Now()
		} else {
			h.refused = true
		}
	}
	h.mu.Unlock()
	switch {
	case presented == 0:
	case resumed:
		s.resumeDone(nil)
	case perr != nil:
		s.resumeDone(fmt.Errorf("%w: the server's answer could not be read (%w)", ErrResumeTooLate, perr))
	default:
		s.resumeDone(fmt.Errorf("%w: session 0x%x expired or its password is wrong (the server answered 0x%x)", ErrResumeTooLate, presented, r.ID))
	}
}

// unanswered is called when ep's session is connected: if Config.Resume is
// still to be presented then, the handshake went past the wrapped connection
// (a go-zookeeper that no longer dials through it), and the resume failed.
func (ep *Epoch) unanswered() {
	h := &ep.hs
	h.mu.Lock()
	pending := h.resume != nil
	if pending {
		h.resume, h.refused = nil, true
	}
	h.mu.Unlock()
	if pending {
		ep.s.resumeDone(fmt.Errorf("%w: the session was made without its handshake passing through the sidecar's dialer", ErrResumeTooLate))
	}
}

// refusedFirst tells whether ep presented Config.Resume, was refused, and has
// not been connected since: go-zookeeper then reports the session expired and
// makes a new one on the same connection, which is no loss of anything.
func (ep *Epoch) refusedFirst() bool {
	ep.hs.mu.Lock()
	defer ep.hs.mu.Unlock()
	return ep.hs.refused && ep.connects.Load() == 0
}

// Resumable returns the id, password and negotiated timeout the server last
// gave ep's session, to be saved for a successor; false until the server has
// answered. The password is a copy.
func (ep *Epoch) Resumable() (Resumable, bool) {
	ep.hs.mu.Lock()
	defer ep.hs.mu.Unlock()
	r := ep.hs.answer
	r.Password = bytes.Clone(r.Password)
	return r, ep.hs.known
}

// resumedAt is when ep took over Config.Resume's session; zero if it did not.
func (ep *Epoch) resumedAt() time.Time {
	ep.hs.mu.Lock()
	defer ep.hs.mu.Unlock()
	return ep.hs.resumedAt
}

// resumeOutcome is what became of Config.Resume, known once.
type resumeOutcome struct {
	once sync.Once
	done chan struct{}
	err  error
}

// resumeDone records the outcome of Config.Resume (nil: resumed) the first
// time, logs and counts it.
func (s *Session) resumeDone(err error) {
	s.resume.once.Do(func() {
		s.resume.err = err
		close(s.resume.done)
		if errors.Is(err, ErrNoResume) {
			return
		}
		id := fmt.Sprintf("0x%x", s.cfg.Resume.ID)
		if err == nil {
			s.metrics.resumes.WithLabelValues("resumed").Inc()
			s.log.Info("zookeeper session resumed", "session", id)
			return
		}
		s.metrics.resumes.WithLabelValues("too_late").Inc()
		s.log.Warn("zookeeper session not resumed, starting a new one", "session", id, "err", err)
	})
}

// WaitResume waits until the server has answered the session Config.Resume
// named: nil when it gave the session back (this Session's first epoch is
// that session, its ephemeral nodes owned; it counts as connected once
// Current says so), ErrResumeTooLate when it did not (the Session goes on with
// a new session). ErrNoResume without Config.Resume, ErrClosed if the Session
// ends first, ErrUnavailable wrapping ctx's error if ctx does.
func (s *Session) WaitResume(ctx context.Context) error {
	select {
	case <-s.resume.done:
		return s.resume.err
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

// rewriteConnectRequest returns the ConnectRequest b naming r's session and
// password instead of none. It refuses a b not laid out as go-zookeeper v1.0.4
// writes it (another protocol version, a session already named, a length that
// does not add up), so that a go-zookeeper that changes its handshake is
// noticed, never sent garbled. lastZxidSeen stays go-zookeeper's (0 on a new
// connection: the server accepts it; one above the server's it refuses).
func rewriteConnectRequest(b []byte, r *Resumable) ([]byte, error) {
	if len(b) < reqPasswdAt+4 {
		return nil, fmt.Errorf("a first write of %d bytes", len(b))
	}
	if n := int(binary.BigEndian.Uint32(b)); n != len(b)-4 {
		return nil, fmt.Errorf("length %d in a first write of %d bytes", n, len(b))
	}
	if v := int32(binary.BigEndian.Uint32(b[4:])); v != 0 {
		return nil, fmt.Errorf("protocol version %d", v)
	}
	if id := int64(binary.BigEndian.Uint64(b[reqSessionAt:])); id != 0 {
		return nil, fmt.Errorf("session 0x%x already named", id)
	}
	pwLen := int(int32(binary.BigEndian.Uint32(b[reqPasswdAt:])))
	rest := reqPasswdAt + 4 + pwLen
	if pwLen < 0 || rest > len(b) || len(b)-rest > 1 { // at most the readOnly byte follows
		return nil, fmt.Errorf("password length %d in a first write of %d bytes", pwLen, len(b))
	}
	out := make([]byte, 0, len(b)-pwLen+len(r.Password))
	out = append(out, b[:reqSessionAt]...)
	out = binary.BigEndian.AppendUint64(out, uint64(r.ID))
	out = binary.BigEndian.AppendUint32(out, uint32(len(r.Password)))
	out = append(out, r.Password...)
	out = append(out, b[rest:]...)
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, nil
}

// parseConnectResponse reads the ConnectResponse at the start of b: complete
// once b holds all of it, an error if it cannot be one.
func parseConnectResponse(b []byte) (r Resumable, complete bool, err error) {
	if len(b) < 4 {
		return r, false, nil
	}
	n := int(binary.BigEndian.Uint32(b))
	if n < respPasswdAt+4 || n > maxConnectResponse {
		return r, false, fmt.Errorf("a connect answer of %d bytes", n)
	}
	if len(b) < 4+n {
		return r, false, nil
	}
	body := b[4 : 4+n]
	pwLen := int(int32(binary.BigEndian.Uint32(body[respPasswdAt:])))
	if pwLen < 0 || respPasswdAt+4+pwLen > n {
		return r, false, fmt.Errorf("password length %d in a connect answer of %d bytes", pwLen, n)
	}
	r.ID = int64(binary.BigEndian.Uint64(body[respSessionAt:]))
	r.Timeout = time.Duration(int32(binary.BigEndian.Uint32(body[respTimeoutAt:]))) * time.Millisecond
	r.Password = bytes.Clone(body[respPasswdAt+4 : respPasswdAt+4+pwLen])
	return r, true, nil
}
