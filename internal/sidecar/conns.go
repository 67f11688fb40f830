package sidecar

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// No client can lock others out of the listener (issue 40): a kept-alive
// connection idle for --idle-timeout is closed (http.Server.IdleTimeout), and
// at --max-conns the longest-idle connection is closed at once to make room
// for a new one (limitedListener, reclaimIdle). Connections with a request
// under way and event streams (hijacked) are never closed to make room; one
// that has not sent a whole first request (a slowloris client, which
// --read-header-timeout cuts off) is, once it has taken a second, when no
// connection is idle.

// The states of a connEntry beyond http.ConnState's: stateGone once the
// connection is closed or hijacked (its entry is out of the map), and
// stateReclaimed once reclaimIdle has chosen it to close (it is in no list).
const (
	stateGone      = http.ConnState(-1)
	stateReclaimed = http.ConnState(-2)
)

// reclaimIdle closes the connection idle the longest, if one is idle, and
// reports whether it closed one: its place under --max-conns is free once it
// returns. While none is idle, it closes instead the oldest connection that
// has not sent a whole first request within newReclaimAge (a slowloris client
// would hold its place until --read-header-timeout). Either is the head of
// its list (connStates), so making room costs the same whatever the number
// of connections. The chosen entry leaves its list and becomes
// stateReclaimed under the lock, so a connection that began a request
// meanwhile is not chosen, and none is closed twice. Closing is the
// underlying connection's (under TLS, no close_notify is written to a client
// that may not read): limitedConn.reclaim, which gives its place up without
// waiting for the connection's goroutine.
func (c *connStates) reclaimIdle() bool {
	newBefore := time.Now().Add(-newReclaimAge).UnixNano()
	c.mu.Lock()
	e := c.idle.head
	if e == nil && c.fresh.head != nil && c.fresh.head.since < newBefore {
		e = c.fresh.head
	}
	if e == nil {
		c.mu.Unlock()
		return false
	}
	e.unlink()
	e.state = stateReclaimed
	conn := e.conn
	c.mu.Unlock()
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	if lc, ok := conn.(*limitedConn); ok {
		lc.reclaim()
	} else {
		_ = conn.Close()
	}
	return true
}

// newReclaimAge is how long a connection may take to send its first request
// before it may be closed to make room at --max-conns (when none is idle).
const newReclaimAge = time.Second

// idleCount is the number of idle kept-alive connections.
func (c *connStates) idleCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idle.n
}

// capWarning logs that the listener reached --max-conns, at most once per
// capWarnEvery.
type capWarning struct {
	log  *slog.Logger
	max  int
	last atomic.Int64 // Unix nanoseconds of the last warning
}

// capWarnEvery is the least time between two warnings of the cap.
const capWarnEvery = time.Minute

func (w *capWarning) reached(idle int) {
	now := time.Now().UnixNano()
	last := w.last.Load()
	if last != 0 && now-last < int64(capWarnEvery) || !w.last.CompareAndSwap(last, now) {
		return
	}
	w.log.Warn("connections: --max-conns reached; the longest-idle connection is closed to make room for each new one, "+
		"and a new one waits while none is idle (this warning at most once a minute)",
		"maxConns", w.max, "idle", idle)
}

// registerConnGauges exports coord_http_connections{state}: "idle" the
// kept-alive connections waiting for a request, "active" every other open
// one (a request under way, an event stream, a first request not yet read).
func registerConnGauges(reg prometheus.Registerer, l *limitedListener, conns *connStates) {
	help := "Open client connections of the main listener by state: idle (kept alive, waiting for a request) or active (any other: a request under way, an event stream, a first request not yet read)."
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coord_http_connections", Help: help, ConstLabels: prometheus.Labels{"state": "idle"}},
			func() float64 { return float64(min(conns.idleCount(), l.open())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "coord_http_connections", Help: help, ConstLabels: prometheus.Labels{"state": "active"}},
			func() float64 { return float64(max(0, l.open()-conns.idleCount())) }),
	)
}
