package sse_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// lines reads a response body line by line on its own goroutine.
type lines struct {
	ch   chan string
	err  chan error
	stop chan struct{}
}

func readLines(r io.Reader) *lines {
	l := &lines{ch: make(chan string), err: make(chan error, 1), stop: make(chan struct{})}
	go func() {
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if line != "" {
					err = errors.New("partial line " + line + ": " + err.Error())
				}
				l.err <- err
				return
			}
			select {
			case l.ch <- strings.TrimSuffix(line, "\n"):
			case <-l.stop:
				return
			}
		}
	}()
	return l
}

func (l *lines) next(t *testing.T) string {
	t.Helper()
	select {
	case s := <-l.ch:
		return s
	case err := <-l.err:
		t.Fatalf("stream ended: %v", err)
	case <-time.After(wait):
		t.Fatal("timed out waiting for a line")
	}
	return ""
}

// event returns the next event's lines, skipping comments.
func (l *lines) event(t *testing.T) string {
	t.Helper()
	var ev []string
	for {
		s := l.next(t)
		switch {
		case strings.HasPrefix(s, ":"):
		case s == "":
			if len(ev) > 0 {
				return strings.Join(ev, "\n")
			}
		default:
			ev = append(ev, s)
		}
	}
}

// comment returns the next comment line, skipping anything else.
func (l *lines) comment(t *testing.T) string {
	t.Helper()
	for {
		if s := l.next(t); strings.HasPrefix(s, ":") {
			return s
		}
	}
}

// end waits for the end of the stream and returns how it ended, skipping
// comments; an event makes it fail.
func (l *lines) end(t *testing.T) error {
	t.Helper()
	for {
		select {
		case s := <-l.ch:
			if !strings.HasPrefix(s, ":") {
				t.Fatalf("unexpected line %q before the end of the stream", s)
			}
		case err := <-l.err:
			return err
		case <-time.After(wait):
			t.Fatal("stream did not end")
		}
	}
}

func TestServeOverHTTP(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	b.Publish("t", ev("t", 1))

	served := make(chan error, 4)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w, err := sse.NewWriter(rw, 5*time.Second)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		served <- sse.Serve(r.Context(), w, b.Subscribe(r.URL.Query().Get("topic")), 20*time.Millisecond)
	}))
	srv.Config.RegisterOnShutdown(b.Close) // how the sidecar ends its streams
	srv.Start()
	defer srv.Close()

	get := func(lastEventID string) (*http.Response, *lines) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/?topic=t", nil)
		if err != nil {
			t.Fatal(err)
		}
		if lastEventID != "" {
			req.Header.Set("Last-Event-ID", lastEventID)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		l := readLines(resp.Body)
		t.Cleanup(func() { close(l.stop); resp.Body.Close() })
		return resp, l
	}

	resp, l := get("")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got, want := l.event(t), "id: 1\nevent: t\ndata: {\"n\":1}"; got != want {
		t.Fatalf("first event\n%s\nwant the current state\n%s", got, want)
	}
	b.Publish("t", ev("t", 2))
	if got, want := l.event(t), "id: 2\nevent: t\ndata: {\"n\":2}"; got != want {
		t.Fatalf("live event\n%s\nwant\n%s", got, want)
	}
	b.Publish("t", sse.Event{ID: "3", Name: "t", Data: []byte("{\n\"n\": 3\n}")})
	if got, want := l.event(t), "id: 3\nevent: t\ndata: {\ndata: \"n\": 3\ndata: }"; got != want {
		t.Fatalf("multi-line event\n%s\nwant\n%s", got, want)
	}
	if got := l.comment(t); got != ": ping" {
		t.Fatalf("heartbeat %q, want \": ping\"", got)
	}

	// A client reconnecting with Last-Event-ID gets the current state first.
	_, l2 := get("2")
	if got := l2.event(t); !strings.HasPrefix(got, "id: 3\n") {
		t.Fatalf("reconnected stream starts with\n%s\nwant the current state (id 3)", got)
	}

	// An event published just before shutdown reaches both clients, then
	// their streams end cleanly (a complete chunked body, not a reset).
	b.Publish("t", ev("t", 4))
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for _, l := range []*lines{l, l2} {
		if got, want := l.event(t), "id: 4\nevent: t\ndata: {\"n\":4}"; got != want {
			t.Fatalf("last event\n%s\nwant\n%s", got, want)
		}
		if err := l.end(t); err != io.EOF {
			t.Fatalf("stream ended with %v, want a clean EOF", err)
		}
	}
	for range 2 {
		if err := <-served; err != nil {
			t.Fatalf("Serve returned %v after the broker closed, want nil", err)
		}
	}
}

func TestServeDrainsOnBrokerClose(t *testing.T) {
	for _, mode := range []string{"pulled", "events"} {
		t.Run(mode, func(t *testing.T) {
			noLeaks(t)
			b := sse.NewBroker(sse.Options{})
			b.Publish("t", ev("t", 1))
			sub := b.Subscribe("t")
			if mode == "events" {
				_ = sub.Events()
			}
			b.Publish("t", ev("t", 2))
			b.Publish("t", ev("t", 3))
			b.Close()

			rec := httptest.NewRecorder()
			w, err := sse.NewWriter(rec, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := sse.Serve(context.Background(), w, sub, time.Hour); err != nil {
				t.Fatalf("Serve = %v, want nil", err)
			}
			want := "id: 1\nevent: t\ndata: {\"n\":1}\n\n" +
				"id: 2\nevent: t\ndata: {\"n\":2}\n\n" +
				"id: 3\nevent: t\ndata: {\"n\":3}\n\n"
			if rec.Body.String() != want {
				t.Fatalf("body\n%q\nwant\n%q", rec.Body, want)
			}
		})
	}
}

// Serve on a live subscription returns when the broker closes.
func TestServeReturnsOnBrokerClose(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	sub := b.Subscribe("t")
	rec := httptest.NewRecorder()
	w, err := sse.NewWriter(rec, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- sse.Serve(context.Background(), w, sub, time.Hour) }()
	b.Publish("t", ev("t", 1))
	b.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-time.After(wait):
		t.Fatal("Serve did not return after Close")
	}
	if want := "id: 1\nevent: t\ndata: {\"n\":1}\n\n"; rec.Body.String() != want {
		t.Fatalf("body %q, want %q", rec.Body, want)
	}
}

func TestServeReturnsOnContextEnd(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	sub := b.Subscribe("t")
	w, err := sse.NewWriter(httptest.NewRecorder(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- sse.Serve(ctx, w, sub, time.Hour) }()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-time.After(wait):
		t.Fatal("Serve did not return after the context ended")
	}
	waitDone(t, sub)
	if !errors.Is(sub.Err(), sse.ErrUnsubscribed) {
		t.Fatalf("subscription after Serve: %v, want ErrUnsubscribed (Serve closes it)", sub.Err())
	}
}

func TestServeReturnsDropError(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{Buffer: 1})
	defer b.Close()
	sub := b.Subscribe("t")
	b.Publish("t", ev("t", 1))
	b.Publish("t", ev("t", 2)) // dropped before Serve starts
	rec := httptest.NewRecorder()
	w, err := sse.NewWriter(rec, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := sse.Serve(context.Background(), w, sub, time.Hour); !errors.Is(err, sse.ErrSlowSubscriber) {
		t.Fatalf("Serve = %v, want ErrSlowSubscriber", err)
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("Serve wrote stale events of a dropped subscription: %q", rec.Body)
	}
}

func TestServeReturnsWriteError(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	b.Publish("t", ev("t", 1))
	d := &deadlined{h: http.Header{}}
	w, err := sse.NewWriter(d, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("broken pipe")
	d.writeErr = boom
	sub := b.Subscribe("t")
	if err := sse.Serve(context.Background(), w, sub, time.Hour); !errors.Is(err, boom) {
		t.Fatalf("Serve = %v, want the write error", err)
	}
	if !errors.Is(sub.Err(), sse.ErrUnsubscribed) {
		t.Fatalf("subscription after Serve: %v, want ErrUnsubscribed", sub.Err())
	}
}

func TestServeHeartbeat(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w, err := sse.NewWriter(rw, time.Second)
		if err != nil {
			return
		}
		_ = sse.Serve(r.Context(), w, b.Subscribe("idle"), 10*time.Millisecond)
	}))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	l := readLines(resp.Body)
	defer func() { close(l.stop); resp.Body.Close() }()
	for range 3 {
		if got := l.next(t); got != ": ping" {
			t.Fatalf("idle stream sent %q, want heartbeats", got)
		}
	}
}
