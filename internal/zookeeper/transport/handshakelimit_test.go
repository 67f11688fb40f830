package transport

import (
	"errors"
	"net"
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
