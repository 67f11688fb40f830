package logwriter

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// lockedBuffer records every Write the Batched writer makes.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) read() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

func TestLinesArriveWholeInOrderWithinTheInterval(t *testing.T) {
	var out lockedBuffer
	b := New(&out, 20*time.Millisecond)
	defer b.Close()
	var want strings.Builder
	for i := range 100 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		if _, err := b.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 5*time.Second, "every line written", func() bool { got, _ := out.read(); return got == want.String() })
	if _, writes := out.read(); writes >= 100 {
		t.Errorf("%d writes for 100 lines: not batched", writes)
	}
}

func TestConcurrentWritersKeepLinesWhole(t *testing.T) {
	var out lockedBuffer
	b := New(&out, time.Millisecond)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				_, _ = fmt.Fprintf(b, "writer %d line %d %s\n", w, i, strings.Repeat("x", 40))
			}
		})
	}
	wg.Wait()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := out.read()
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	if len(lines) != 8*2000 {
		t.Fatalf("%d lines, want %d", len(lines), 8*2000)
	}
	next := map[int]int{}
	for _, l := range lines {
		var w, i int
		var x string
		if n, err := fmt.Sscanf(l, "writer %d line %d %s", &w, &i, &x); n != 3 || err != nil || len(x) != 40 {
			t.Fatalf("torn line %q", l)
		}
		if i != next[w] {
			t.Fatalf("writer %d: line %d after %d", w, i, next[w]-1)
		}
		next[w]++
	}
}

func TestFlushCloseAndAfterClose(t *testing.T) {
	var out lockedBuffer
	b := New(&out, time.Hour)
	_, _ = b.Write([]byte("a\n"))
	if got, _ := out.read(); got != "" {
		t.Fatalf("written before the interval: %q", got)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if got, _ := out.read(); got != "a\n" {
		t.Fatalf("after Flush: %q", got)
	}
	_, _ = b.Write(bytes.Repeat([]byte("y"), MaxBuffered))
	if got, _ := out.read(); len(got) != 2+MaxBuffered {
		t.Fatalf("a full buffer waited: %d bytes out", len(got))
	}
	_, _ = b.Write([]byte("b\n"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	_, _ = b.Write([]byte("c\n"))
	if got, _ := out.read(); !strings.HasSuffix(got, "b\nc\n") {
		t.Fatalf("after Close: %q", got[len(got)-10:])
	}
}
