package sse_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

func TestWriterFormat(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := sse.NewWriter(rec, time.Second) // the recorder has no deadlines: ignored
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || !rec.Flushed || rec.Body.Len() != 0 {
		t.Fatalf("after NewWriter: code %d, flushed %v, body %q", rec.Code, rec.Flushed, rec.Body)
	}
	for k, v := range map[string]string{
		"Content-Type":      "text/event-stream",
		"Cache-Control":     "no-cache",
		"Connection":        "keep-alive",
		"X-Accel-Buffering": "no",
	} {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}

	steps := []struct {
		send func() error
		want string
	}{
		{func() error { return w.Send(sse.Event{ID: "1", Name: "state", Data: []byte(`{"a":1}`)}) },
			"id: 1\nevent: state\ndata: {\"a\":1}\n\n"},
		{func() error { return w.Send(sse.Event{Name: "state", Data: []byte("{\"a\":\n1}")}) },
			"event: state\ndata: {\"a\":\ndata: 1}\n\n"},
		{func() error { return w.Send(sse.Event{ID: "3", Name: "x", Data: []byte("a\r\nb\rc\n\n d")}) },
			"id: 3\nevent: x\ndata: a\ndata: b\ndata: c\ndata:\ndata:  d\n\n"},
		{func() error { return w.Send(sse.Event{ID: "4", Name: "x"}) },
			"id: 4\nevent: x\ndata:\n\n"},
		{func() error { return w.Send(sse.Event{ID: "5", Data: []byte("null")}) },
			"id: 5\ndata: null\n\n"},
		{func() error { return w.Comment("ping") }, ": ping\n"},
		{func() error { return w.Comment("") }, ":\n"},
		{func() error { return w.Comment("a\nb") }, ": a\n: b\n"},
	}
	for i, s := range steps {
		rec.Body.Reset()
		rec.Flushed = false
		if err := s.send(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := rec.Body.String(); got != s.want {
			t.Errorf("step %d wrote\n%q\nwant\n%q", i, got, s.want)
		}
		if !rec.Flushed {
			t.Errorf("step %d did not flush", i)
		}
	}
}

func TestWriterRejectsInvalidEvent(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := sse.NewWriter(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []sse.Event{
		{ID: "1\n2", Name: "x", Data: []byte("1")},
		{ID: "1\r", Name: "x", Data: []byte("1")},
		{ID: "1\x00", Name: "x", Data: []byte("1")},
		{ID: "1", Name: "x\ndata: evil", Data: []byte("1")},
	} {
		if err := w.Send(e); !errors.Is(err, sse.ErrInvalidEvent) {
			t.Errorf("Send(%q, %q) = %v, want ErrInvalidEvent", e.ID, e.Name, err)
		}
	}
	if rec.Body.Len() != 0 {
		t.Fatalf("invalid events wrote %q", rec.Body)
	}
	// The stream is still usable.
	if err := w.Send(sse.Event{ID: "1", Name: "x", Data: []byte("1")}); err != nil {
		t.Fatal(err)
	}
}

// bare is a ResponseWriter that cannot flush.
type bare struct {
	h           http.Header
	wroteHeader bool
}

func (b *bare) Header() http.Header         { return b.h }
func (b *bare) Write(p []byte) (int, error) { b.wroteHeader = true; return len(p), nil }
func (b *bare) WriteHeader(int)             { b.wroteHeader = true }

// wrapper is a middleware's ResponseWriter that hides Flush but unwraps.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func TestNewWriterNeedsFlush(t *testing.T) {
	b := &bare{h: http.Header{}}
	if _, err := sse.NewWriter(b, time.Second); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("NewWriter on a writer without Flush: %v, want ErrNotSupported", err)
	}
	if b.wroteHeader {
		t.Fatal("NewWriter wrote a response it cannot stream")
	}
	if _, err := sse.NewWriter(wrapper{b}, time.Second); !errors.Is(err, http.ErrNotSupported) {
		t.Fatalf("NewWriter through Unwrap: %v, want ErrNotSupported", err)
	}
	rec := httptest.NewRecorder()
	if _, err := sse.NewWriter(wrapper{rec}, time.Second); err != nil || !rec.Flushed {
		t.Fatalf("NewWriter through Unwrap to a flusher: %v, flushed %v", err, rec.Flushed)
	}
}

// deadlined records the deadline set before each write and can fail.
type deadlined struct {
	h          http.Header
	body       bytes.Buffer
	deadlines  []time.Time
	writes     int
	flushes    int
	writeErr   error
	deadlineOK bool // deadline set since the last write
	unordered  bool // a write or flush came without a fresh deadline
}

func (d *deadlined) Header() http.Header { return d.h }
func (d *deadlined) WriteHeader(int) {
	if !d.deadlineOK {
		d.unordered = true
	}
}
func (d *deadlined) Write(p []byte) (int, error) {
	d.writes++
	if !d.deadlineOK {
		d.unordered = true
	}
	if d.writeErr != nil {
		return 0, d.writeErr
	}
	return d.body.Write(p)
}
func (d *deadlined) Flush() { d.flushes++; d.deadlineOK = false }
func (d *deadlined) SetWriteDeadline(t time.Time) error {
	d.deadlines = append(d.deadlines, t)
	d.deadlineOK = true
	return nil
}

func TestWriterSetsDeadlineBeforeEveryWrite(t *testing.T) {
	d := &deadlined{h: http.Header{}}
	start := time.Now()
	w, err := sse.NewWriter(d, 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(sse.Event{ID: "1", Name: "x", Data: []byte("1")}); err != nil {
		t.Fatal(err)
	}
	if err := w.Comment("ping"); err != nil {
		t.Fatal(err)
	}
	if len(d.deadlines) != 3 || d.flushes != 3 || d.unordered {
		t.Fatalf("deadlines %d, flushes %d, write without fresh deadline %v", len(d.deadlines), d.flushes, d.unordered)
	}
	for _, dl := range d.deadlines {
		if dl.Before(start.Add(3*time.Second)) || dl.After(time.Now().Add(3*time.Second)) {
			t.Fatalf("deadline %v not now+3s", dl)
		}
	}

	// writeTimeout <= 0: no deadline.
	d0 := &deadlined{h: http.Header{}, deadlineOK: true}
	w0, err := sse.NewWriter(d0, 0)
	if err != nil {
		t.Fatal(err)
	}
	_ = w0.Comment("x")
	if len(d0.deadlines) != 0 {
		t.Fatalf("writeTimeout 0 set %d deadlines", len(d0.deadlines))
	}
}

func TestWriterErrorIsSticky(t *testing.T) {
	d := &deadlined{h: http.Header{}}
	w, err := sse.NewWriter(d, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("connection reset")
	d.writeErr = boom
	if err := w.Send(sse.Event{ID: "1", Data: []byte("1")}); !errors.Is(err, boom) {
		t.Fatalf("Send = %v, want the write error", err)
	}
	if err := w.Comment("x"); !errors.Is(err, boom) || d.writes != 1 {
		t.Fatalf("Comment after a failed write = %v with %d writes, want the same error and no write", err, d.writes)
	}
}

func TestWriterLargeData(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := sse.NewWriter(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	big := `"` + strings.Repeat("x", 100<<10) + `"`
	if err := w.Send(sse.Event{ID: "1", Data: []byte(big)}); err != nil {
		t.Fatal(err)
	}
	if got := rec.Body.String(); got != "id: 1\ndata: "+big+"\n\n" {
		t.Fatalf("large event mangled (%d bytes)", len(got))
	}
}

// What the Writer writes, the Reader reads back, multi-line data included.
func TestReaderReadsWriterOutput(t *testing.T) {
	rec := httptest.NewRecorder()
	w, err := sse.NewWriter(rec, 0)
	if err != nil {
		t.Fatal(err)
	}
	sent := []sse.Event{
		{ID: "1", Name: "a", Data: []byte(`{"x":1}`)},
		{ID: "2", Name: "b", Data: []byte("line1\nline2")},
	}
	for _, e := range sent {
		if err := w.Send(e); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Comment("ping"); err != nil {
		t.Fatal(err)
	}
	r := sse.NewReader(rec.Body)
	for _, want := range sent {
		got, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.Name != want.Name || string(got.Data) != string(want.Data) {
			t.Fatalf("read %+v, want %+v", got, want)
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v, want io.EOF", err)
	}
}
