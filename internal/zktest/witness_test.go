package zktest

import (
	"testing"
	"time"
)

// A dead witness's session ends by the servers' expiry, never before its
// timeout has passed since Die was called (the servers heard from it after
// that); a live one keeps its node.
func TestWitnessExpiresAfterItsTimeout(t *testing.T) {
	c := Shared(t)
	w := StartWitness(t, c.Servers(), time.Second)
	if ok, _, err := w.observer.Exists(w.node); err != nil || !ok {
		t.Fatalf("the live witness's node: exists %v, %v", ok, err)
	}
	died := time.Now()
	w.Die(t)
	w.AwaitExpired(t, time.Minute)
	if d := time.Since(died); d < time.Second {
		t.Fatalf("the witness expired %s after Die was called; want at least its timeout, 1s", d)
	}
}
