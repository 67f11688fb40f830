package sse

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// socketPair returns the two ends of a loopback TCP connection, the server's
// with a small send buffer.
func socketPair(t *testing.T) (server, client *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	server, client = s.(*net.TCPConn), c.(*net.TCPConn)
	if err := server.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadBuffer(32 << 10); err != nil {
		t.Fatal(err)
	}
	return server, client
}

func bigEv(id int) Event {
	return Event{ID: strconv.Itoa(id), Data: []byte(`"` + strings.Repeat("x", 4<<10) + `"`)}
}

// The flushers' steps, one at a time (no flusher goroutine runs): a full socket
// leaves the rest of a frame and the events after it to Serve; until Serve has
// written them, a flusher writes nothing newer; Serve writes them first, and
// then what was published meanwhile: the client reads every event once, whole
// and in order.
func TestFlushDirectLeavesTheRestToServe(t *testing.T) {
	server, client := socketPair(t)
	w := &Writer{conn: server, raw: newRawWriter(server), timeout: 5 * time.Second}
	if w.raw == nil {
		t.Skip("no direct writes on this system")
	}
	b := NewBroker(Options{Buffer: 1000})
	defer b.Close()
	b.flush = newFlusher(0, &b.directWritten, &b.directLeft) // marked subscriptions wait
	sub := b.Subscribe("t")
	sub.sink.Store(w)

	for i := range 100 { // 400 KiB: more than the socket buffers hold
		b.Publish("t", bigEv(i))
	}
	written, left := sub.flushDirect()
	if !left || written == 0 || written >= 100 {
		t.Fatalf("flushDirect wrote %d events, left some to Serve: %v; want some written, the rest left", written, left)
	}
	if len(w.pending) == 0 || len(w.backlog) != 100-written-1 {
		t.Fatalf("left %d bytes and %d events, want the rest of event %d and the %d after it", len(w.pending), len(w.backlog), written, 100-written-1)
	}
	<-sub.ready // Serve is woken

	b.Publish("t", bigEv(100))
	if n, l := sub.flushDirect(); n != 0 || l {
		t.Fatalf("flushDirect wrote %d events past what it left to Serve", n)
	}
	<-sub.ready

	done := make(chan error, 1)
	go func() { done <- readEvents(client, 101) }()
	var batch []Event
	if err := w.locked(sub, func() error { // what Serve does when woken
		batch = sub.take(batch)
		return sendTaken(w, sub, batch)
	}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Serve holds the Writer: a flusher leaves the event to it and wakes it.
	w.mu.Lock()
	b.Publish("t", bigEv(101))
	if n, _ := sub.flushDirect(); n != 0 {
		t.Fatal("flushDirect wrote while Serve held the Writer")
	}
	w.mu.Unlock()
	select {
	case <-sub.ready:
	default:
		t.Fatal("Serve was not woken")
	}
}

// readEvents reads n events from conn and checks that they are events 0..n-1,
// whole and in order.
func readEvents(conn net.Conn, n int) error {
	br := bufio.NewReader(conn)
	for i := range n {
		id, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		data, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		blank, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if id != "id: "+strconv.Itoa(i)+"\n" || len(data) != len("data: \"\"\n")+4<<10 || blank != "\n" {
			return &badEvent{i, id}
		}
	}
	return nil
}

type badEvent struct {
	want int
	id   string
}

func (e *badEvent) Error() string { return "event " + strconv.Itoa(e.want) + ": read " + e.id }
