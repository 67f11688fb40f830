package sse

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Event is one server-sent event.
type Event struct {
	ID   string // the id: line; omitted when empty; must not contain CR, LF or NUL
	Name string // the event: line; omitted when empty; must not contain CR or LF
	Data []byte // JSON, written as data: line(s); not modified by this package

	// frame is the event as written on the stream, made once by Publish and
	// shared by every subscriber's Writer (nil: framed by Send).
	frame []byte
}

// ErrInvalidEvent is returned (wrapped) by [Writer.Send] for an event whose
// ID or Name would break the stream's framing; nothing is written then.
var ErrInvalidEvent = errors.New("sse: invalid event")

// Data encodes v as JSON for [Event.Data] and guarantees the result is a
// single line: [json.Marshal] escapes line breaks inside strings and compacts
// the output of [json.Marshaler] values and [json.RawMessage]. For a value
// that cannot be encoded (a channel, a function, a NaN, a pointer cycle) it
// returns json.Marshal's error rather than a placeholder such as null.
func Data(v any) ([]byte, error) {
	return json.Marshal(v)
}

// maxKeptBuffer bounds the scratch buffer a Writer keeps between writes.
const maxKeptBuffer = 64 << 10

// Writer writes events to one HTTP response. Each Send or Comment sets a
// write deadline, writes the whole event in one Write and flushes it, so a
// client never sees half an event unless the connection fails. After a write
// fails, every later one returns the same error without writing. A Writer is
// not safe for concurrent use.
type Writer struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	conn net.Conn // set instead of w and rc for a hijacked stream
	// deadlineSet is when the hijacked conn's deadline was last pushed: it is
	// pushed again only once half the timeout has passed (a timer update per
	// event costs more than the write itself at 10,000 streams).
	deadlineSet time.Time
	timeout     time.Duration
	buf         []byte
	err         error // sticky write error

	// A hijacked stream over a socket is written directly by the broker's
	// flushers when they find it idle (see direct.go): raw writes without
	// blocking. mu is held by whoever writes (the flusher or Serve); pending is
	// what a flusher could not write without blocking, which Serve writes
	// first; detached is set once Serve stops, after which no flusher
	// touches the Writer.
	raw      *rawWriter
	mu       sync.Mutex
	pending  []byte
	backlog  []Event // the events after pending, for Serve
	detached bool
	batch    []Event // scratch for the events taken (by a flusher or Serve)
}

// hijackedHeader starts the response on a hijacked connection. The body ends
// when the connection closes (no chunking), so the connection is not reused.
const hijackedHeader = "HTTP/1.1 200 OK\r\n" +
	"Content-Type: text/event-stream\r\n" +
	"Cache-Control: no-cache\r\n" +
	"X-Accel-Buffering: no\r\n" +
	"Connection: close\r\n\r\n"

// Hijack starts an event stream by taking the connection over from net/http:
// the server's per-connection buffers and its background reader are let go, and
// the handler may return while another goroutine serves the stream. This is what
// keeps many idle streams cheap. The caller must Close the Writer. Nothing is
// written and an error wrapping http.ErrNotSupported is returned when w cannot be
// hijacked (HTTP/2, a recorder): use NewWriter then. A hijacked stream notices a
// client that went away only when a write fails, or through Reap. Over a socket,
// the write deadline is set only while a write blocks (a client that stops
// reading is still cut off after writeTimeout), and Serve lets the broker's
// flushers write most events (see the package's caveats).
func Hijack(w http.ResponseWriter, writeTimeout time.Duration) (*Writer, error) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, fmt.Errorf("sse: hijack: %w", err)
	}
	_ = brw // its buffers go with it: the client sends nothing more on a stream
	sw := &Writer{conn: conn, timeout: writeTimeout, raw: newRawWriter(conn)}
	if sw.raw != nil {
		// Deadlines are set only while a write blocks (see writeRaw): clear any
		// the server left, which would fail the flushers' writes once passed.
		if err := conn.SetWriteDeadline(time.Time{}); err != nil {
			conn.Close()
			return nil, fmt.Errorf("sse: set write deadline: %w", err)
		}
	}
	if err := sw.write([]byte(hijackedHeader)); err != nil {
		conn.Close()
		return nil, err
	}
	return sw, nil
}

// Conn returns the hijacked connection (nil for a Writer made by NewWriter).
func (w *Writer) Conn() net.Conn { return w.conn }

// Close closes a hijacked stream's connection; for a NewWriter stream it does
// nothing (net/http ends the response when the handler returns).
func (w *Writer) Close() error {
	if w.conn == nil {
		return nil
	}
	return w.conn.Close()
}

// NewWriter starts an event stream on w: it sets Content-Type
// text/event-stream, Cache-Control no-cache, Connection keep-alive and
// X-Accel-Buffering no, writes status 200 and flushes. If w cannot flush
// (neither it nor any writer it unwraps to implements [http.Flusher]) it
// returns an error wrapping [http.ErrNotSupported] and writes nothing, so the
// caller can still send an error response. writeTimeout > 0 is the deadline
// set before every write (through [http.ResponseController.SetWriteDeadline];
// a writer that does not support deadlines is written without one);
// writeTimeout <= 0 sets no deadline.
func NewWriter(w http.ResponseWriter, writeTimeout time.Duration) (*Writer, error) {
	if !canFlush(w) {
		return nil, fmt.Errorf("sse: response writer cannot flush: %w", http.ErrNotSupported)
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	h.Del("Content-Length")
	sw := &Writer{w: w, rc: http.NewResponseController(w), timeout: writeTimeout}
	if err := sw.setDeadline(); err != nil {
		return nil, err
	}
	w.WriteHeader(http.StatusOK)
	if err := sw.rc.Flush(); err != nil {
		return nil, fmt.Errorf("sse: flush: %w", err)
	}
	return sw, nil
}

// canFlush reports whether http.ResponseController can flush w, following
// the same Unwrap chain it does, without writing anything.
func canFlush(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case interface{ FlushError() error }, http.Flusher:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// Send writes e as one event: "id: ID" (if any), "event: Name" (if any), one
// "data: line" per line of Data (CRLF, LF and CR all end a line; an empty
// line is written as "data:"), then a blank line; then it flushes. It returns
// an error wrapping [ErrInvalidEvent] without writing if ID contains CR, LF
// or NUL or Name contains CR or LF, and otherwise the write or flush error.
func (w *Writer) Send(e Event) error {
	e.frame = nil // e may be a changed copy of a published event
	return w.send(e)
}

// send is Send for an event as the broker delivered it: its frame, when made,
// is its fields', written as it is.
func (w *Writer) send(e Event) error {
	if w.err != nil {
		return w.err
	}
	if e.frame != nil {
		return w.writeShared(e.frame)
	}
	b, err := appendEvent(w.buf[:0], e)
	if err != nil {
		return err
	}
	return w.write(b)
}

// appendEvent appends e as written on a stream (see Send), or returns an error
// wrapping ErrInvalidEvent.
func appendEvent(b []byte, e Event) ([]byte, error) {
	if strings.ContainsAny(e.ID, "\r\n\x00") {
		return b, fmt.Errorf("%w: id %q contains CR, LF or NUL", ErrInvalidEvent, e.ID)
	}
	if strings.ContainsAny(e.Name, "\r\n") {
		return b, fmt.Errorf("%w: name %q contains CR or LF", ErrInvalidEvent, e.Name)
	}
	if e.ID != "" {
		b = append(b, "id: "...)
		b = append(b, e.ID...)
		b = append(b, '\n')
	}
	if e.Name != "" {
		b = append(b, "event: "...)
		b = append(b, e.Name...)
		b = append(b, '\n')
	}
	b = appendLines(b, "data", e.Data)
	return append(b, '\n'), nil
}

// framed returns e with its frame made, once, for all the subscribers it goes
// to; an invalid event is left without one (Send then refuses it).
func framed(e Event) Event {
	e.frame = nil
	if b, err := appendEvent(nil, e); err == nil {
		e.frame = b
	}
	return e
}

// Comment writes text as comment lines (": text"; one per line of text, and
// a lone ":" for empty text) and flushes. Clients ignore comments; they keep
// the connection busy. It returns the write or flush error.
func (w *Writer) Comment(text string) error {
	if w.err != nil {
		return w.err
	}
	return w.write(appendLines(w.buf[:0], "", []byte(text)))
}

// Retry writes a retry: field of d (in milliseconds, the time a client waits
// before it reconnects once the stream ends) and flushes.
func (w *Writer) Retry(d time.Duration) error {
	if w.err != nil {
		return w.err
	}
	return w.write(fmt.Appendf(w.buf[:0], "retry: %d\n\n", d.Milliseconds()))
}

// appendLines appends one "field: line\n" per line of data (just "field:\n"
// for an empty line). CRLF, LF and CR each end a line, as in the SSE spec.
func appendLines(b []byte, field string, data []byte) []byte {
	for {
		i := bytes.IndexAny(data, "\r\n")
		line := data
		if i >= 0 {
			line = data[:i]
		}
		b = append(b, field...)
		b = append(b, ':')
		if len(line) > 0 {
			b = append(b, ' ')
			b = append(b, line...)
		}
		b = append(b, '\n')
		if i < 0 {
			return b
		}
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
}

// write sends b with a fresh deadline and flushes; a failure is sticky. b may
// be w.buf, which it keeps for the next event.
func (w *Writer) write(b []byte) error {
	if cap(b) <= maxKeptBuffer {
		w.buf = b[:0]
	} else {
		w.buf = nil
	}
	return w.writeShared(b)
}

// writeShared is write for bytes it must not keep (an event's shared frame).
func (w *Writer) writeShared(b []byte) error {
	if w.raw != nil {
		return w.writeRaw(b)
	}
	if err := w.setDeadline(); err != nil {
		w.err = err
		return err
	}
	if w.conn != nil {
		if _, err := w.conn.Write(b); err != nil {
			w.err = fmt.Errorf("sse: write: %w", err)
			return w.err
		}
		return nil
	}
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("sse: write: %w", err)
		return w.err
	}
	if err := w.rc.Flush(); err != nil {
		w.err = fmt.Errorf("sse: flush: %w", err)
		return w.err
	}
	return nil
}

// setDeadline sets the per-write deadline; http.ErrNotSupported is ignored.
func (w *Writer) setDeadline() error {
	if w.timeout <= 0 {
		return nil
	}
	if w.conn != nil {
		now := time.Now()
		if now.Sub(w.deadlineSet) < w.timeout/2 {
			return nil // the deadline is still at least timeout/2 away
		}
		if err := w.conn.SetWriteDeadline(now.Add(w.timeout)); err != nil {
			return fmt.Errorf("sse: set write deadline: %w", err)
		}
		w.deadlineSet = now
		return nil
	}
	err := w.rc.SetWriteDeadline(time.Now().Add(w.timeout))
	if err != nil && !errors.Is(err, http.ErrNotSupported) {
		return fmt.Errorf("sse: set write deadline: %w", err)
	}
	return nil
}

// finish gives the server one more writeTimeout to end the response (the
// chunked terminator is written after the handler returns) unless the stream
// already failed.
func (w *Writer) finish() {
	if w.err == nil && w.raw == nil {
		_ = w.setDeadline()
	}
}
