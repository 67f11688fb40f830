package transport

import (
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// How quickly a client moves to another server (issue 36). go-zookeeper, on
// its own, waits a whole second after every round of the servers that found
// none serving (while an ensemble elects its leader, every server refuses
// its clients), and gives a server's answer to the session handshake ten
// times two thirds of the session timeout (a server that accepts the
// connection but does not answer, a JVM paused or hung, would hold the client
// longer than the session lives). So:
//
//   - Quick pauses between rounds itself: RoundPause for the first
//     ShortRounds rounds (an election's few seconds), go-zookeeper's second
//     after: a client is back within about RoundPause of the ensemble's new
//     leader serving, not at the next whole second;
//   - every connection dialed gets its handshake's deadline cut to
//     HandshakeTimeout of the session timeout (at least MinHandshake), and the
//     next server is tried after it.
//
// The servers keep go-zookeeper's order: after a connection ends, the next
// server of the shuffled list is tried first and the one just left last.

// Round pauses: after a round that found no server serving, RoundPause for
// ShortRounds rounds, then LongRoundPause (go-zookeeper's own).
const (
	RoundPause     = 100 * time.Millisecond
	ShortRounds    = 30
	LongRoundPause = time.Second
)

// HandshakeTimeout is the share of the session timeout a server has to answer
// the session handshake (ConnectRequest) before the client tries the next,
// and MinHandshake its floor.
const (
	HandshakeTimeout = 3 // a third
	MinHandshake     = 2 * time.Second
)

// Quick wraps a host provider so that a round of the servers that found none
// serving is followed by a short pause (RoundPause; LongRoundPause after
// ShortRounds such rounds in a row), taken here, instead of go-zookeeper's
// second. Once done is
// closed (the connection is being closed for good), the round's end is
// reported to go-zookeeper again, which then sees its own closing and stops.
func Quick(hosts zk.HostProvider, done <-chan struct{}) zk.HostProvider {
	return &quickHosts{HostProvider: hosts, done: done}
}

type quickHosts struct {
	zk.HostProvider
	done <-chan struct{}

	mu     sync.Mutex
	rounds int // rounds without a connection since the last one
}

func (q *quickHosts) Next() (string, bool) {
	server, retryStart := q.HostProvider.Next()
	if !retryStart {
		return server, false
	}
	select {
	case <-q.done:
		return server, true
	default:
	}
	q.mu.Lock()
	pause := RoundPause
	if q.rounds >= ShortRounds {
		pause = LongRoundPause
	}
	q.rounds++
	q.mu.Unlock()
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-t.C:
		return server, false
	case <-q.done:
		return server, true
	}
}

func (q *quickHosts) Connected() {
	q.mu.Lock()
	q.rounds = 0
	q.mu.Unlock()
	q.HostProvider.Connected()
}

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
