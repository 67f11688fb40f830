package api

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// collectLines is a slog.Handler keeping the "status" of every line it
// writes (a line's number in these tests).
type collectLines struct {
	mu sync.Mutex
	ns []int64
}

func (c *collectLines) Enabled(context.Context, slog.Level) bool { return true }
func (c *collectLines) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *collectLines) WithGroup(string) slog.Handler            { return c }
func (c *collectLines) Handle(_ context.Context, r slog.Record) error {
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "status" {
			c.mu.Lock()
			c.ns = append(c.ns, a.Value.Int64())
			c.mu.Unlock()
		}
		return true
	})
	return nil
}

func line(n int) *requestLine {
	return &requestLine{end: time.Unix(1, 0), method: "GET", path: "/v1/session", route: "/v1/session", status: n}
}

// The request lines handed over are all written, in the order handed over,
// more of them than the queue holds; those written after close too, after
// them; and lines handed over by many goroutines while it closes are all
// written once.
func TestRequestLinesInOrderNoneLost(t *testing.T) {
	c := &collectLines{}
	l := newRequestLines(c)
	const n = 3 * lineBuffer
	for i := range n {
		l.write(line(i))
	}
	l.close()
	for i := n; i < n+10; i++ {
		l.write(line(i))
	}
	l.close() // a second close does nothing
	if len(c.ns) != n+10 {
		t.Fatalf("%d lines written, want %d", len(c.ns), n+10)
	}
	for i, got := range c.ns {
		if got != int64(i) {
			t.Fatalf("line %d is %d: out of order", i, got)
		}
	}

	c = &collectLines{}
	l = newRequestLines(c)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				l.write(line(g*500 + i))
			}
		})
	}
	l.close()
	wg.Wait()
	seen := map[int64]bool{}
	for _, v := range c.ns {
		if seen[v] {
			t.Fatalf("line %d written twice", v)
		}
		seen[v] = true
	}
	if len(seen) != 8*500 {
		t.Fatalf("%d lines written, want %d", len(seen), 8*500)
	}
}

// A line handed over reaches the log without a close: the writer takes its
// batch by itself (lineBatchDelay after the batch's first line).
func TestRequestLinesWrittenWhileOpen(t *testing.T) {
	c := &collectLines{}
	l := newRequestLines(c)
	defer l.close()
	l.write(line(7))
	testutil.Eventually(t, 10*time.Second, "the line written", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.ns) == 1 && c.ns[0] == 7
	})
}
