package transport

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Resuming a session.
//
// ZooKeeper lets a client reconnect to a live session from any connection to
// any server of the ensemble by presenting the session's id and password in its
// ConnectRequest; go-zookeeper has no option for it, but every connection it
// makes comes from the dialer. A Handshake wraps each connection: the first
// write (go-zookeeper's ConnectRequest, one write) may be rewritten to name the
// session to resume, and the first answer (the server's ConnectResponse) is
// read as it passes to learn the session's id, password and timeout. After
// those two, the wrapper passes every byte through untouched.

var errDetached = errors.New("zookeeper: the session was detached, no new connection is made")

// Handshake is one go-zookeeper client's part in resuming (one zk.Conn, and
// every connection it dials in turn): what it presents, what the server
// answered, and its newest connection (to cut it in Detach).
type Handshake struct {
	// outcome is told what became of resume; nil for a client that resumes
	// nothing.
	outcome *Resume
	log     *slog.Logger

	mu sync.Mutex
	// resume is presented on every connection until the server answers one;
	// nil then, and for a client that resumes nothing.
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

// NewHandshake returns the handshakes of a client that presents resume's
// session (resume nil: none) on every connection until a server answers one,
// and then tells resume its outcome: resumed when the server gave the session
// back, else ErrResumeTooLate (as when the request could not be rewritten, or
// the session was made without its handshake passing through these
// connections: see Unanswered). An answer that cannot be read is logged to log.
func NewHandshake(resume *Resume, log *slog.Logger) *Handshake {
	h := &Handshake{outcome: resume, log: log}
	if resume != nil {
		h.resume = resume.session
	}
	return h
}

// Dialer returns d with every connection it makes wrapped for h, then by
// outer (the wrapper that sees go-zookeeper's own bytes). Once h is detached
// it makes none.
func (h *Handshake) Dialer(d zk.Dialer, outer func(net.Conn) net.Conn) zk.Dialer {
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := d(network, address, timeout)
		if err != nil {
			return nil, err
		}
		if !h.adopt(c) {
			c.Close()
			return nil, errDetached
		}
		return outer(&handshakeConn{Conn: c, h: h}), nil
	}
}

// adopt records c as the newest connection, closing the one before (go-zookeeper
// dials only once it is done with it, but leaves it open after an expired
// answer). False once detached.
func (h *Handshake) adopt(c net.Conn) bool {
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

// Detach closes the newest connection and refuses every later one: nothing
// more, closeSession included, reaches the server.
func (h *Handshake) Detach() {
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
	h         *Handshake
	wrote     bool  // the ConnectRequest has gone out
	answered  bool  // the ConnectResponse has been read (or given up on)
	presented int64 // the session id this connection presented to resume; 0 none
	in        []byte
}

func (c *handshakeConn) Write(b []byte) (int, error) {
	if c.wrote {
		return c.Conn.Write(b)
	}
	c.wrote = true
	out, presented := c.h.connectRequest(b)
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
			c.h.connectAnswered(r, c.presented, perr)
		}
	}
	return n, err
}

// connectRequest returns what to write for go-zookeeper's ConnectRequest b: b
// itself, or, while h still has a session to present, b naming that session,
// with the id presented.
func (h *Handshake) connectRequest(b []byte) ([]byte, int64) {
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
		h.outcome.finish(fmt.Errorf("%w: go-zookeeper's connect request is not the one this sidecar knows how to rewrite (%w)", ErrResumeTooLate, err))
		return b, 0
	}
	return out, r.ID
}

// connectAnswered records the server's answer on a connection that presented
// the session presented (0: go-zookeeper's own request).
func (h *Handshake) connectAnswered(r Resumable, presented int64, perr error) {
	if perr != nil {
		h.log.Error("zookeeper: the server's connect answer could not be read", "err", perr)
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
		h.outcome.finish(nil)
	case perr != nil:
		h.outcome.finish(fmt.Errorf("%w: the server's answer could not be read (%w)", ErrResumeTooLate, perr))
	default:
		h.outcome.finish(fmt.Errorf("%w: session 0x%x expired or its password is wrong (the server answered 0x%x)", ErrResumeTooLate, presented, r.ID))
	}
}

// Unanswered is called when the client's session is connected: if the
// session to resume is still to be presented then, the handshake went past
// the wrapped connection (a go-zookeeper that no longer dials through it), and
// the resume failed.
func (h *Handshake) Unanswered() {
	h.mu.Lock()
	pending := h.resume != nil
	if pending {
		h.resume, h.refused = nil, true
	}
	h.mu.Unlock()
	if pending {
		h.outcome.finish(fmt.Errorf("%w: the session was made without its handshake passing through the sidecar's dialer", ErrResumeTooLate))
	}
}

// Refused tells whether h presented a session to resume and was refused (or
// could not present it).
func (h *Handshake) Refused() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.refused
}

// Answer returns the id, password and negotiated timeout the server last gave
// the client's session; false until the server has answered. The password is
// a copy.
func (h *Handshake) Answer() (Resumable, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.answer
	r.Password = bytes.Clone(r.Password)
	return r, h.known
}

// ResumedAt is when the server gave back the session presented; zero if it
// did not.
func (h *Handshake) ResumedAt() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.resumedAt
}
