package sse_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// hijacked serves a broker's topics as hijacked streams, the way the sidecar
// does (api/topics.go): Hijack, subscribe, watch with a reaper, Serve on a
// goroutine of its own. Each stream's subscription is sent on subs and what
// Serve returned on served.
type hijacked struct {
	srv    *httptest.Server
	reaper *sse.Reaper
	subs   chan *sse.Subscription
	served chan error
}

type hijackOptions struct {
	timeout   time.Duration // the write timeout (default 5s)
	heartbeat time.Duration // default an hour
	reap      time.Duration // the reaper's interval (default an hour)
	sndbuf    int           // the server socket's send buffer, when > 0
	tls       bool          // serve over TLS
	// subscribe makes each stream's subscription (default b.Subscribe).
	subscribe func(topic string) *sse.Subscription
}

func serveHijacked(t *testing.T, b *sse.Broker, o hijackOptions) *hijacked {
	t.Helper()
	o.timeout = cmpOr(o.timeout, 5*time.Second)
	o.heartbeat = cmpOr(o.heartbeat, time.Hour)
	o.reap = cmpOr(o.reap, time.Hour)
	if o.subscribe == nil {
		o.subscribe = func(topic string) *sse.Subscription { return b.Subscribe(topic) }
	}
	h := &hijacked{reaper: sse.NewReaper(o.reap), subs: make(chan *sse.Subscription, 64), served: make(chan error, 64)}
	ctx, cancel := context.WithCancel(context.Background())
	var streams sync.WaitGroup
	h.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sw, err := sse.Hijack(rw, o.timeout)
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		if tc, ok := sw.Conn().(*net.TCPConn); ok && o.sndbuf > 0 {
			if err := tc.SetWriteBuffer(o.sndbuf); err != nil {
				t.Errorf("SetWriteBuffer: %v", err)
			}
		}
		sub := o.subscribe(r.URL.Query().Get("topic"))
		forget := h.reaper.Watch(sw, sub.Close)
		h.subs <- sub
		streams.Go(func() {
			defer sw.Close()
			defer forget()
			h.served <- sse.Serve(ctx, sw, sub, o.heartbeat)
		})
	}))
	if o.tls {
		h.srv.StartTLS()
	} else {
		h.srv.Start()
	}
	t.Cleanup(func() {
		cancel()
		b.Close()
		streams.Wait()
		h.reaper.Close()
		h.srv.Close()
	})
	return h
}

func cmpOr(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// client is one subscriber's connection; its body is read only once lines is
// called, so until then its socket fills as a stuck client's does.
type client struct {
	conn net.Conn
	body io.Reader
	l    *lines
}

// dial opens a stream of topic (rcvbuf > 0 sets the socket's receive buffer)
// and reads the response header.
func (h *hijacked) dial(t *testing.T, topic string, rcvbuf int) (*client, *sse.Subscription) {
	t.Helper()
	var conn net.Conn
	var err error
	if h.srv.TLS != nil {
		conn, err = tls.Dial("tcp", h.srv.Listener.Addr().String(), h.srv.Client().Transport.(*http.Transport).TLSClientConfig)
	} else {
		conn, err = net.Dial("tcp", h.srv.Listener.Addr().String())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if tc, ok := conn.(*net.TCPConn); ok && rcvbuf > 0 {
		if err := tc.SetReadBuffer(rcvbuf); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fmt.Fprintf(conn, "GET /?topic=%s HTTP/1.1\r\nHost: test\r\n\r\n", topic); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	select {
	case sub := <-h.subs:
		return &client{conn: conn, body: resp.Body}, sub
	case <-time.After(wait):
		t.Fatal("no subscription")
	}
	return nil, nil
}

func (c *client) lines(t *testing.T) *lines {
	if c.l == nil {
		c.l = readLines(c.body)
		t.Cleanup(func() { close(c.l.stop) })
	}
	return c.l
}

// expect reads the next event and checks that it is event id of topic t.
func (c *client) expect(t *testing.T, id int) {
	t.Helper()
	got := c.lines(t).event(t)
	if want := "id: " + strconv.Itoa(id) + "\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("got event\n%.80s\nwant id %d", got, id)
	}
}

func (h *hijacked) servedErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-h.served:
		return err
	case <-time.After(wait):
		t.Fatal("Serve did not return")
	}
	return nil
}

// bigEvent is event id of topic "t" with about size bytes of data.
func bigEvent(id, size int) sse.Event {
	return sse.Event{ID: strconv.Itoa(id), Name: "t", Data: []byte(`{"pad":"` + strings.Repeat("x", size) + `"}`)}
}

// Many hijacked subscribers get every event, in order, once, written by the
// broker's flushers rather than by each stream's goroutine.
func TestHijackedStreamsGetEveryEventInOrder(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{Buffer: 512})
	h := serveHijacked(t, b, hijackOptions{})
	b.Publish("t", ev("t", 0))
	clients := make([]*client, 20)
	for i := range clients {
		clients[i], _ = h.dial(t, "t", 0)
		clients[i].expect(t, 0)
	}
	const events = 300
	for i := 1; i <= events; i++ {
		b.Publish("t", ev("t", i))
	}
	for _, c := range clients {
		for i := 1; i <= events; i++ {
			c.expect(t, i)
		}
	}
	if written, _ := sse.DirectStats(b); written == 0 {
		t.Fatal("the flushers wrote nothing: every event was written by Serve")
	}
}

// A subscriber whose socket buffer is full does not hold up the others: each
// event reaches a reading client before the next is published. What the
// flushers could not write goes to the stuck stream's Serve, which writes it
// before anything newer: once its client reads, it gets every event in order.
func TestHijackedFullSocketFallsBackInOrder(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	h := serveHijacked(t, b, hijackOptions{sndbuf: 4096})
	b.Publish("t", ev("t", 0))
	slow, slowSub := h.dial(t, "t", 32<<10)
	fast, _ := h.dial(t, "t", 0)
	fast.expect(t, 0)
	const events = 40 // of 16 KiB: far more than both socket buffers hold
	for i := 1; i <= events; i++ {
		b.Publish("t", bigEvent(i, 16<<10))
		fast.expect(t, i)
	}
	// The flushers wrote (most of) the fast client's events. (A flusher leaves
	// an event to Serve when it finds Serve holding the Writer, as it may here,
	// where each event is published as soon as the last one is read. The
	// flushers' side of a full socket is shown step by step by
	// TestFlushDirectLeavesTheRestToServe.)
	if written, _ := sse.DirectStats(b); written == 0 {
		t.Fatal("the flushers wrote nothing")
	}
	if err := slowSub.Err(); err != nil {
		t.Fatalf("the slow subscriber ended: %v", err)
	}
	for i := 0; i <= events; i++ {
		slow.expect(t, i)
	}
	b.Publish("t", ev("t", events+1)) // and the flushers write to it again
	slow.expect(t, events+1)
	fast.expect(t, events+1)
}

// A client that stops reading is dropped as slow once Options.Buffer events
// wait for it, and cut off by the write deadline; nobody else waits for it.
func TestHijackedStuckClient(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{Buffer: 4})
	h := serveHijacked(t, b, hijackOptions{sndbuf: 4096, timeout: 300 * time.Millisecond})
	_, stuckSub := h.dial(t, "t", 4096)
	fast, _ := h.dial(t, "t", 0)
	for i := 1; i <= 40; i++ {
		b.Publish("t", bigEvent(i, 16<<10))
		fast.expect(t, i)
	}
	waitDone(t, stuckSub)
	if err := stuckSub.Err(); !errors.Is(err, sse.ErrSlowSubscriber) {
		t.Fatalf("the stuck subscriber ended with %v, want ErrSlowSubscriber", err)
	}
	// Its Serve was blocked in a write: the deadline ends it.
	if err := h.servedErr(t); !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, sse.ErrSlowSubscriber) {
		t.Fatalf("the stuck stream's Serve returned %v, want a passed deadline or ErrSlowSubscriber", err)
	}
	b.Publish("t", ev("t", 41))
	fast.expect(t, 41)
}

// A client that goes away is noticed by the reaper, with nothing published.
func TestHijackedGoneClientReaped(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	h := serveHijacked(t, b, hijackOptions{reap: 10 * time.Millisecond})
	b.Publish("t", ev("t", 1))
	c, sub := h.dial(t, "t", 0)
	c.expect(t, 1)
	c.conn.Close()
	waitDone(t, sub)
	if err := sub.Err(); !errors.Is(err, sse.ErrUnsubscribed) {
		t.Fatalf("subscription of a gone client ended with %v, want ErrUnsubscribed", err)
	}
	if err := h.servedErr(t); !errors.Is(err, sse.ErrUnsubscribed) {
		t.Fatalf("Serve returned %v, want ErrUnsubscribed", err)
	}
}

// The reaper sleeps with nothing to watch (the first stream comes after it
// started, and every stream after it was idle again) and still reaps each
// gone client once woken.
func TestHijackedReaperWakesAfterIdle(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	h := serveHijacked(t, b, hijackOptions{reap: 10 * time.Millisecond})
	for i := range 3 {
		b.Publish("t", ev("t", i+1))
		c, sub := h.dial(t, "t", 0)
		c.expect(t, i+1)
		c.conn.Close()
		waitDone(t, sub)
		if err := h.servedErr(t); !errors.Is(err, sse.ErrUnsubscribed) {
			t.Fatalf("stream %d: Serve returned %v, want ErrUnsubscribed (reaped)", i, err)
		}
	}
}

// Without the reaper, a flusher's failed write ends the stream of a gone client.
func TestHijackedGoneClientFailsWrite(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	h := serveHijacked(t, b, hijackOptions{})
	c, sub := h.dial(t, "t", 0)
	c.conn.Close()
	for i := 1; ; i++ {
		b.Publish("t", ev("t", i)) // the first write after the close draws a reset; a later one fails
		select {
		case err := <-h.served:
			if err == nil || errors.Is(err, sse.ErrUnsubscribed) {
				t.Fatalf("Serve returned %v, want the write error", err)
			}
			if !errors.Is(sub.Err(), sse.ErrUnsubscribed) {
				t.Fatalf("subscription after Serve: %v, want ErrUnsubscribed", sub.Err())
			}
			return
		case <-time.After(10 * time.Millisecond): // polling interval
		}
		if i > 1000 {
			t.Fatal("no write failed")
		}
	}
}

// Heartbeats, keyed topics, an invalid event and the broker's close over a
// hijacked stream.
func TestHijackedStreamLifecycle(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	h := serveHijacked(t, b, hijackOptions{heartbeat: 10 * time.Millisecond})
	b.PublishKeyed("t", "a", ev("t", 1))
	c, _ := h.dial(t, "t", 0)
	c.expect(t, 1)
	if got := c.lines(t).comment(t); got != ": ping" {
		t.Fatalf("heartbeat %q", got)
	}
	b.PublishKeyed("t", "b", ev("t", 2))
	b.PublishKeyed("t", "a", ev("t", 3))
	c.expect(t, 2)
	c.expect(t, 3)
	b.Publish("t", ev("t", 4))
	b.Close()
	c.expect(t, 4)
	if err := c.lines(t).end(t); err != io.EOF {
		t.Fatalf("stream ended with %v, want EOF", err)
	}
	if err := h.servedErr(t); err != nil {
		t.Fatalf("Serve returned %v after the broker closed", err)
	}

	b2 := sse.NewBroker(sse.Options{})
	h2 := serveHijacked(t, b2, hijackOptions{})
	c2, _ := h2.dial(t, "t", 0)
	b2.Publish("t", ev("t", 5))
	c2.expect(t, 5)
	b2.Publish("t", sse.Event{ID: "6\n", Data: []byte("{}")})
	if err := h2.servedErr(t); !errors.Is(err, sse.ErrInvalidEvent) {
		t.Fatalf("Serve returned %v for an invalid event, want ErrInvalidEvent", err)
	}
}

// Send writes an event's fields as they are, even for a changed copy of a
// published event (whose shared frame the broker made from the old fields).
func TestSendFramesAChangedCopyOfAPublishedEvent(t *testing.T) {
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	b.Publish("t", ev("t", 1))
	e, _ := b.Current("t")
	e.ID = "2"
	rec := httptest.NewRecorder()
	w, err := sse.NewWriter(rec, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(e); err != nil {
		t.Fatal(err)
	}
	if got, want := rec.Body.String(), "id: 2\nevent: t\ndata: {\"n\":1}\n\n"; got != want {
		t.Fatalf("Send wrote %q, want %q", got, want)
	}
}

// A stream hijacked from a TLS connection is written by Serve through the TLS
// connection, never by the flushers to the socket under it.
func TestHijackedTLSStreamIsNotWrittenRaw(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	h := serveHijacked(t, b, hijackOptions{tls: true})
	b.Publish("t", ev("t", 1))
	c, _ := h.dial(t, "t", 0)
	c.expect(t, 1)
	for i := 2; i <= 20; i++ {
		b.Publish("t", ev("t", i))
	}
	for i := 2; i <= 20; i++ {
		c.expect(t, i)
	}
	if written, _ := sse.DirectStats(b); written != 0 {
		t.Fatalf("the flushers wrote %d events to a TLS stream's socket", written)
	}
}
