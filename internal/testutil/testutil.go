// Package testutil holds the helpers that tests of several packages share. It
// is imported by tests only.
package testutil

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// patience multiplies every wait that only bounds a failure (Patience): 4, or
// COORD_TEST_PATIENCE when it is a positive number.
var patience = func() time.Duration {
	if f, err := strconv.ParseFloat(os.Getenv("COORD_TEST_PATIENCE"), 64); err == nil && f > 0 {
		return time.Duration(f * 1000)
	}
	return 4000
}()

// Patience is d as a bound on a wait that only a failure reaches: a condition
// that is to hold, an event that is to come. It is d times 4, so that a test
// written with the bound a quiet machine needs still passes on a busy 2-core
// machine under -race (issue 22); a passing test never waits for it. A wait
// whose end is the claim (nothing happens within d) must not use it, and
// neither may a figure: speeds are make bench's rows, never a test's bound.
func Patience(d time.Duration) time.Duration { return d * patience / 1000 }

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
// The bound is within made Patient.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("not within %s: %s", Patience(within), what)
	}
}

// Within checks cond until it holds, as Eventually does, and reports whether
// it did within within (made Patient), for a test that goes on either way.
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(Patience(within))
	pause := pollFirst
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(pause) // the polling interval, not an ordering of steps
		pause = min(2*pause, pollMax)
	}
	return true
}

// MetricValue is the value of the one series of the counter or gauge name that g
// gathers; false when g has none (or more than one).
func MetricValue(t testing.TB, g prometheus.Gatherer, name string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		if gg := m.GetGauge(); gg != nil {
			return gg.GetValue(), true
		}
	}
	return 0, false
}
