package sidecar

import (
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// pipeConns is n connections as limitListener hands them out, over net.Pipe
// (their far ends closed with the test).
func pipeConns(t *testing.T, l *limitedListener, n int) []*limitedConn {
	conns := make([]*limitedConn, n)
	for i := range conns {
		near, far := net.Pipe()
		t.Cleanup(func() { near.Close(); far.Close() })
		if err := l.place(); err != nil {
			t.Fatal(err)
		}
		conns[i] = &limitedConn{Conn: near, l: l}
	}
	return conns
}

// At the cap, the connection idle the longest is reclaimed first, then,
// while none is idle, the oldest that has not sent a first request within
// newReclaimAge; one with a request under way never is. A reclaimed
// connection gives its place up at once, before it is closed: its reads fail
// even after a new deadline (its server goroutine then closes it), and the
// count of connections still closing goes back to 0 once it is.
func TestReclaimOrderAndPlace(t *testing.T) {
	var states connStates
	l := limitListener(nil, 4, states.reclaimIdle, nil)
	c := pipeConns(t, l, 4)
	states.track(c[0], http.StateNew) // a slowloris client, old (below)
	states.track(c[1], http.StateNew) // a new client, young
	states.track(c[2], http.StateNew)
	states.track(c[2], http.StateActive) // a request under way
	states.track(c[3], http.StateNew)
	states.track(c[3], http.StateActive)
	states.track(c[3], http.StateIdle) // idle
	states.mu.Lock()
	states.conns[c[0]].since = time.Now().Add(-2 * newReclaimAge).UnixNano()
	states.mu.Unlock()

	if !states.reclaimIdle() || states.conns[c[3]].state != stateReclaimed {
		t.Fatal("the idle connection was not the first reclaimed")
	}
	if l.open() != 3 {
		t.Fatalf("a reclaimed connection kept its place: %d open, want 3", l.open())
	}
	_ = c[3].SetReadDeadline(time.Now().Add(time.Hour)) // as net/http does before it reads
	if _, err := c[3].Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a reclaimed connection's read: %v, want a deadline error", err)
	}
	if !states.reclaimIdle() || states.conns[c[0]].state != stateReclaimed {
		t.Fatal("with none idle, the old connection without a first request was not reclaimed")
	}
	if states.reclaimIdle() {
		t.Fatal("a young fresh connection or one with a request under way was reclaimed")
	}
	if got := l.closing.Load(); got != 2 {
		t.Fatalf("%d connections closing, want 2", got)
	}
	for _, i := range []int{3, 0} {
		c[i].Close()
		states.track(c[i], http.StateClosed)
	}
	if got, open := l.closing.Load(), l.open(); got != 0 || open != 2 {
		t.Fatalf("after the reclaimed ones closed: %d closing (want 0), %d open (want 2)", got, open)
	}
	if len(states.conns) != 2 || states.idleCount() != 0 {
		t.Fatalf("tracked %d connections (want 2), %d idle (want 0)", len(states.conns), states.idleCount())
	}
}

// Past maxClosing connections still closing, reclaiming one closes it: its
// place is free and the count of those closing stays at the bound.
func TestReclaimBeyondMaxClosing(t *testing.T) {
	l := limitListener(nil, 2, nil, nil)
	l.maxClosing = 1
	c := pipeConns(t, l, 2)
	c[0].reclaim()
	c[1].reclaim()
	if got := l.closing.Load(); got != 1 {
		t.Fatalf("%d connections closing, want 1", got)
	}
	if _, err := c[1].Write([]byte("x")); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("the connection reclaimed past the bound is not closed: %v", err)
	}
	if l.open() != 0 {
		t.Fatalf("%d places held, want 0", l.open())
	}
	c[0].Close()
	c[0].Close()
	if got := l.closing.Load(); got != 0 {
		t.Fatalf("%d connections closing after the close, want 0", got)
	}
}
