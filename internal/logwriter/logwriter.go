// Package logwriter batches log output. A busy sidecar writes one request line
// per request; written straight through, each line is one write(2) on the
// request's own path, before its answer is sent. A Batched writer collects the
// lines and hands them to the underlying writer in one write, at most Interval
// after the first of them (or at once when MaxBuffered bytes wait).
//
// Guarantees: lines reach the underlying writer whole and in the order they
// were written; Flush and Close return only once every line written before
// them has been handed over; a line is never held longer than the interval
// while the process runs. What a crash (a panic, SIGKILL) cuts off is at most
// the last interval's lines.
package logwriter

import (
	"io"
	"sync"
	"time"
)

// MaxBuffered is how many bytes may wait before a Write hands them over itself.
const MaxBuffered = 64 << 10

// Batched is an io.Writer that batches writes to another (see the package
// comment). It is safe for concurrent use. An error of the underlying writer
// is not reported to the writers of the lines (a log line has nowhere better
// to go); Flush and Close return it when they meet it.
type Batched struct {
	w        io.Writer
	interval time.Duration

	mu     sync.Mutex
	buf    []byte
	armed  bool // timer runs for what buf holds
	timer  *time.Timer
	closed bool

	out   sync.Mutex // serializes hand-overs, so that batches keep their order
	spare []byte     // the buffer of the last hand-over, reused
}

// New returns a writer that hands what it is given to w at most interval later.
func New(w io.Writer, interval time.Duration) *Batched {
	b := &Batched{w: w, interval: interval}
	b.timer = time.AfterFunc(time.Hour, func() { _ = b.Flush() })
	b.timer.Stop()
	return b
}

// Write queues p (whole; p is copied). After Close it writes p straight through.
func (b *Batched) Write(p []byte) (int, error) {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		b.out.Lock() // after Close's hand-over, one write at a time
		defer b.out.Unlock()
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	full := len(b.buf) >= MaxBuffered
	if !full && !b.armed {
		b.armed = true
		b.timer.Reset(b.interval)
	}
	b.mu.Unlock()
	if full {
		_ = b.Flush()
	}
	return len(p), nil
}

// Flush hands everything written so far to the underlying writer.
func (b *Batched) Flush() error {
	b.out.Lock()
	defer b.out.Unlock()
	return b.handOver(false)
}

// handOver writes what is buffered, and marks b closed first when closing is
// set (under the same lock, so that no write goes straight through before
// what was buffered). b.out is held.
func (b *Batched) handOver(closing bool) error {
	b.mu.Lock()
	if closing {
		b.closed = true
	}
	batch := b.buf
	b.buf = b.spare[:0]
	b.spare = nil
	if b.armed {
		b.armed = false
		b.timer.Stop()
	}
	b.mu.Unlock()
	var err error
	if len(batch) > 0 {
		_, err = b.w.Write(batch)
	}
	b.mu.Lock()
	if cap(batch) <= 4*MaxBuffered { // (appends grow a buffer past MaxBuffered)
		b.spare = batch[:0]
	}
	b.mu.Unlock()
	return err
}

// Close flushes and makes later writes go straight through, after it. A timer
// that fired just before may still run one (empty) Flush after Close returns.
func (b *Batched) Close() error {
	b.out.Lock()
	defer b.out.Unlock()
	return b.handOver(true)
}
