package sidecartest

import (
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// AwaitEvent reads st until an event cond accepts, within d (made
// testutil.Patience), and returns how long it took; past d it fails t,
// naming what.
func AwaitEvent(t testing.TB, st *Stream, d time.Duration, what string, cond func(Event) bool) time.Duration {
	t.Helper()
	d = testutil.Patience(d)
	start := time.Now()
	for {
		left := d - time.Since(start)
		if left <= 0 {
			t.Fatalf("%s: not within %v", what, d)
		}
		if ev := st.Recv(t, left); cond(ev) {
			return time.Since(start)
		}
	}
}

// Timed runs do, then await, and returns how long both took.
func Timed(do, await func()) time.Duration {
	start := time.Now()
	do()
	await()
	return time.Since(start)
}
