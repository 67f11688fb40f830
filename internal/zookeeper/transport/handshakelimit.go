package transport

import (
	"net"
	"sync"
	"time"
)

// How quickly a client leaves a server that does not answer (issue 36).
// go-zookeeper gives a server's answer to the session handshake ten times two
// thirds of the session timeout: a server that accepts the connection but
// does not answer (a JVM paused or hung) would hold the client longer than the
// session lives. Every connection dialed gets its handshake's deadline cut to
// a third of the session timeout (at least MinHandshake), and the next server
// is tried after it.
//
// The servers keep go-zookeeper's order (after a connection ends, the next
// server of the shuffled list first, the one just left last) and its pause of
// a second after a round of the servers that found none serving. A shorter
// pause (100 ms) brought a session back from a leader's loss in 0.44-0.65 s
// instead of 1.02 s, but made two processes presenting one session (a copied
// state directory) take it from each other more than once before one gives
// up, failing TestCopiedStateFileOneProcessWinsOnAnEnsemble in 2 runs of 3
// (1 in 8 with pauses doubling from 100 ms): each round the one left tries
// again sooner, before the other's record of the session has landed.

// HandshakeTimeout is the share of the session timeout a server has to answer
// the session handshake (ConnectRequest) before the client tries the next,
// and MinHandshake its floor.
const (
	HandshakeTimeout = 3 // a third
	MinHandshake     = 2 * time.Second
)

// handshakeLimit is how long a server has to answer the session handshake.
func handshakeLimit(sessionTimeout time.Duration) time.Duration {
	return max(sessionTimeout/HandshakeTimeout, MinHandshake)
}

// limitHandshake wraps a connection so that the first read deadline set on it
// (go-zookeeper's, for the server's answer to the ConnectRequest) is no later
// than limit after the dial.
func limitHandshake(c net.Conn, limit time.Duration) net.Conn {
	return &handshakeDeadline{Conn: c, by: time.Now().Add(limit)}
}

type handshakeDeadline struct {
	net.Conn
	mu sync.Mutex
	by time.Time // zero once the handshake's deadline was set
}

func (c *handshakeDeadline) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	if !c.by.IsZero() && !t.IsZero() {
		if t.After(c.by) {
			t = c.by
		}
		c.by = time.Time{}
	}
	c.mu.Unlock()
	return c.Conn.SetReadDeadline(t)
}
