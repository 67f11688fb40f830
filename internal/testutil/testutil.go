// Package testutil holds the helpers that tests of several packages share. It
// is imported by tests only.
package testutil

import (
	"testing"
	"time"
)

// pollFirst and pollMax bound the pause between two checks of Eventually: it
// starts short, so a condition that holds soon is seen soon, and doubles up to
// pollMax, so a slow one does not keep a shared machine busy.
const (
	pollFirst = 5 * time.Millisecond
	pollMax   = 50 * time.Millisecond
)

// Eventually checks cond until it holds and fails t (with what) if it still does
// not once within has passed. cond runs on the calling goroutine, so it may call
// t's methods; Eventually must be called from the test's goroutine.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	pause := pollFirst
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(pause) // the polling interval, not an ordering of steps
		pause = min(2*pause, pollMax)
	}
}
