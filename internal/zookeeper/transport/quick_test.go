package transport

import (
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// The handshake's read deadline is cut to the limit; later ones are left as
// they are.
func TestHandshakeDeadlineIsCut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			defer c.Close()
			<-stop // accepts, never answers
		}
	}()
	raw, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	c := limitHandshake(raw, 200*time.Millisecond)
	// go-zookeeper's handshake deadline: ten times two thirds of the session timeout.
	if err := c.SetReadDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = c.Read(make([]byte, 4))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read: %v, want a timeout", err)
	}
	if waited := time.Since(start); waited > 30*time.Second {
		t.Fatalf("the handshake's read waited %s: its deadline was not cut", waited)
	}
	// After the handshake: go-zookeeper's own deadlines stand.
	_ = c.SetReadDeadline(time.Time{})
	h := c.(*handshakeDeadline)
	if !h.by.IsZero() {
		t.Fatal("the limit still applies after the handshake's deadline")
	}
}

// fakeHosts ends a round on every second server.
type fakeHosts struct{ n atomic.Int64 }

func (f *fakeHosts) Init([]string) error { return nil }
func (f *fakeHosts) Len() int            { return 2 }
func (f *fakeHosts) Next() (string, bool) {
	n := f.n.Add(1)
	return "s", n%2 == 0
}
func (f *fakeHosts) Connected() {}

// Quick hides a round's end from go-zookeeper (which would wait a second),
// pausing RoundPause itself, until done is closed: then the round's end is
// reported at once, so that go-zookeeper sees its own closing.
func TestQuickPausesBetweenRoundsUntilDone(t *testing.T) {
	done := make(chan struct{})
	q := Quick(&fakeHosts{}, done)
	if _, end := q.Next(); end {
		t.Fatal("a round's first server reported as its end")
	}
	start := time.Now()
	if _, end := q.Next(); end {
		t.Fatal("a round's end reported to go-zookeeper while not done")
	}
	if waited := time.Since(start); waited < RoundPause/2 {
		t.Fatalf("no pause after a round: %s", waited)
	}
	close(done)
	q.Next()
	if _, end := q.Next(); !end {
		t.Fatal("once done, a round's end is not reported")
	}
}
