// Package jsonlog is slog's JSON handler with a shorter path for the records a
// busy sidecar writes most: the request log's line per request. A record whose
// message, keys and string values slog writes unescaped (no quote, backslash,
// control character, invalid UTF-8, U+2028 or U+2029) and whose values are
// strings, integers, booleans or durations is formatted here, into a pooled
// buffer, byte for byte as slog.JSONHandler formats it; any other record (a
// group, an error or any other value, a string to escape, a handler made by
// WithAttrs or WithGroup) is slog.JSONHandler's own.
//
// The writer must take concurrent writes, each whole (as
// internal/logwriter.Batched does): lines formatted here are written without
// the JSONHandler's lock.
package jsonlog

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// Handler is a slog.Handler; see the package comment.
type Handler struct {
	json *slog.JSONHandler
	w    io.Writer
	fast bool // opts allow the short path: no source, no ReplaceAttr
}

// New returns a handler that writes JSON lines to w as
// slog.NewJSONHandler(w, opts) writes them.
func New(w io.Writer, opts *slog.HandlerOptions) *Handler {
	if opts == nil {
		opts = &slog.HandlerOptions{}
	}
	return &Handler{json: slog.NewJSONHandler(w, opts), w: w, fast: !opts.AddSource && opts.ReplaceAttr == nil}
}

// Enabled is the JSONHandler's.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.json.Enabled(ctx, l) }

// WithAttrs is the JSONHandler's: its records take the long path.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler { return h.json.WithAttrs(attrs) }

// WithGroup is the JSONHandler's: its records take the long path.
func (h *Handler) WithGroup(name string) slog.Handler { return h.json.WithGroup(name) }

var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Handle writes r as one line.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if !h.fast {
		return h.json.Handle(ctx, r)
	}
	bp := buffers.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 16<<10 { // a huge line's buffer is not kept
			buffers.Put(bp)
		}
	}()
	buf, ok := appendRecord((*bp)[:0], r)
	*bp = buf
	if !ok {
		return h.json.Handle(ctx, r)
	}
	_, err := h.w.Write(buf)
	return err
}

// appendRecord appends r's line as slog.JSONHandler writes it, or reports
// false for a record it leaves to the JSONHandler.
func appendRecord(buf []byte, r slog.Record) ([]byte, bool) {
	buf = append(buf, '{')
	if !r.Time.IsZero() {
		if y := r.Time.Year(); y < 0 || y >= 10000 {
			return buf, false // the JSONHandler reports this
		}
		buf = append(buf, `"time":"`...)
		buf = r.Time.AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, `",`...)
	}
	buf = append(buf, `"level":"`...)
	buf = append(buf, r.Level.String()...)
	buf = append(buf, `","msg":"`...)
	if !plain(r.Message) {
		return buf, false
	}
	buf = append(buf, r.Message...)
	buf = append(buf, '"')
	ok := true
	r.Attrs(func(a slog.Attr) bool {
		buf, ok = appendAttr(buf, a)
		return ok
	})
	if !ok {
		return buf, false
	}
	return append(buf, "}\n"...), true
}

// appendAttr appends ,"key":value for the kinds formatted here.
func appendAttr(buf []byte, a slog.Attr) ([]byte, bool) {
	if a.Key == "" || !plain(a.Key) {
		return buf, false // an empty attribute is skipped, an empty key kept: the JSONHandler's rules
	}
	buf = append(buf, ',', '"')
	buf = append(buf, a.Key...)
	buf = append(buf, '"', ':')
	switch v := a.Value; v.Kind() {
	case slog.KindString:
		s := v.String()
		if !plain(s) {
			return buf, false
		}
		buf = append(buf, '"')
		buf = append(buf, s...)
		buf = append(buf, '"')
	case slog.KindInt64:
		buf = strconv.AppendInt(buf, v.Int64(), 10)
	case slog.KindUint64:
		buf = strconv.AppendUint(buf, v.Uint64(), 10)
	case slog.KindBool:
		buf = strconv.AppendBool(buf, v.Bool())
	case slog.KindDuration:
		buf = strconv.AppendInt(buf, int64(v.Duration()), 10)
	default:
		return buf, false
	}
	return buf, true
}

// plain tells whether s is written as it is between JSON quotes, as slog
// writes it: printable ASCII but '"' and '\\' (DEL included), and valid UTF-8
// beyond ASCII ("µs" in a duration) but U+2028 and U+2029.
func plain(s string) bool {
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b < 0x20 || b == '"' || b == '\\' {
				return false
			}
			i++
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 || c == '\u2028' || c == '\u2029' {
			return false
		}
		i += size
	}
	return true
}
