package jsonlog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

// Every record comes out byte for byte as slog.JSONHandler writes it, whether
// formatted here or handed to the JSONHandler.
func TestLinesAreTheJSONHandlers(t *testing.T) {
	at := time.Date(2026, 11, 26, 5, 35, 38, 123456789, time.UTC)
	zoned := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", -7*3600-30*60))
	records := []struct {
		name  string
		time  time.Time
		level slog.Level
		msg   string
		attrs []slog.Attr
	}{
		{"request line", at, slog.LevelInfo, "request", []slog.Attr{
			slog.String("method", "POST"), slog.String("path", "/v1/locks/a-b_c.d~e"), slog.String("route", "/v1/locks/{name}"),
			slog.Int("status", 201), slog.String("duration", "1.234567ms"), slog.String("remote", "127.0.0.1:34567"),
			slog.String("problem", "lock-held")}},
		{"no attributes", at, slog.LevelWarn, "plain <message> & more", nil},
		{"zero time", time.Time{}, slog.LevelError, "m", []slog.Attr{slog.Bool("ok", true)}},
		{"zoned time", zoned, slog.LevelInfo + 2, "m", []slog.Attr{slog.Uint64("u", math.MaxUint64), slog.Int64("i", math.MinInt64)}},
		{"duration", at, slog.LevelDebug, "m", []slog.Attr{slog.Duration("d", 1500*time.Millisecond)}},
		{"microseconds", at, slog.LevelInfo, "request", []slog.Attr{slog.String("duration", "79.598µs"), slog.String("path", "/v1/kv/日本\uFFFD")}},
		{"line separators", at, slog.LevelInfo, "m", []slog.Attr{slog.String("a", "x\u2028y"), slog.String("b", "x\u2029y")}},
		{"escaped path", at, slog.LevelInfo, "request", []slog.Attr{slog.String("path", "/v1/locks/\"q\"\\\n\t\x01é\u2028\xff")}},
		{"escaped message", at, slog.LevelInfo, "a \"quoted\" message", nil},
		{"escaped key", at, slog.LevelInfo, "m", []slog.Attr{slog.String("k\"ey", "v")}},
		{"DEL", at, slog.LevelInfo, "m\x7f", []slog.Attr{slog.String("v", "\x7f")}},
		{"empty key", at, slog.LevelInfo, "m", []slog.Attr{slog.String("", "v")}},
		{"empty attribute", at, slog.LevelInfo, "m", []slog.Attr{{}, slog.Int("n", 1)}},
		{"error", at, slog.LevelError, "failed", []slog.Attr{slog.Any("err", errors.New("boom"))}},
		{"float", at, slog.LevelInfo, "m", []slog.Attr{slog.Float64("f", 0.1)}},
		{"time value", at, slog.LevelInfo, "m", []slog.Attr{slog.Time("t", zoned)}},
		{"group", at, slog.LevelInfo, "m", []slog.Attr{slog.Group("g", slog.Int("a", 1)), slog.String("after", "x")}},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), slog.LevelInfo, "m", nil},
		{"many attributes", at, slog.LevelInfo, "m", []slog.Attr{slog.Int("a", 1), slog.Int("b", 2), slog.Int("c", 3),
			slog.Int("d", 4), slog.Int("e", 5), slog.Int("f", 6), slog.Int("g", 7)}},
	}
	for _, rec := range records {
		t.Run(rec.name, func(t *testing.T) {
			r := slog.NewRecord(rec.time, rec.level, rec.msg, 0)
			r.AddAttrs(rec.attrs...)
			var got, want bytes.Buffer
			opts := &slog.HandlerOptions{Level: slog.LevelDebug}
			if err := New(&got, opts).Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			_ = slog.NewJSONHandler(&want, opts).Handle(context.Background(), r)
			if got.String() != want.String() {
				t.Fatalf("got  %s\nwant %s", got.String(), want.String())
			}
		})
	}
}

// A logger made with attributes or a group writes what the JSONHandler writes,
// and so does one whose options replace attributes.
func TestDerivedHandlersAreTheJSONHandlers(t *testing.T) {
	for _, opts := range []*slog.HandlerOptions{nil, {ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}} {
		var got, want bytes.Buffer
		log := func(h slog.Handler) {
			l := slog.New(h)
			l.With("component", "zk").Info("session", "id", 7)
			l.WithGroup("g").Info("grouped", "n", 1)
			l.Info("plain", "n", 2)
		}
		log(New(&got, opts))
		log(slog.NewJSONHandler(&want, opts))
		strip := func(s string) string { // the lines' times differ
			var out []string
			for _, l := range strings.Split(s, "\n") {
				if i := strings.Index(l, `"level"`); i > 0 {
					l = l[i:]
				}
				out = append(out, l)
			}
			return strings.Join(out, "\n")
		}
		if strip(got.String()) != strip(want.String()) {
			t.Fatalf("got\n%s\nwant\n%s", got.String(), want.String())
		}
	}
}

// The request line is formatted here, and allocates nothing of its own.
func TestRequestLineAllocatesNothing(t *testing.T) {
	h := New(discard{}, nil)
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	r.AddAttrs(slog.String("method", "POST"), slog.String("path", "/v1/locks/x"), slog.String("route", "/v1/locks/{name}"),
		slog.Int("status", 201), slog.String("duration", "79.598µs"), slog.String("remote", "127.0.0.1:34567"))
	if _, ok := appendRecord(nil, r); !ok {
		t.Fatal("the request line is left to the JSONHandler")
	}
	if n := testing.AllocsPerRun(100, func() { _ = h.Handle(context.Background(), r) }); n > 0 {
		t.Fatalf("%v allocations per line", n)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
