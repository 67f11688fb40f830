package sidecartest

import (
	"os"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
)

// NewSignals is a subcommand's signal state with no signal received yet; a
// signal sent on send stands in for one the process receives.
func NewSignals(t testing.TB) (sig *ctl.Signals, send chan<- os.Signal) {
	ch := make(chan os.Signal, 1)
	t.Cleanup(func() { close(ch) })
	return ctl.WatchSignals(ch), ch
}

// QuietSignals is the signals of a subcommand run in the test's process: none
// ever comes.
func QuietSignals(t testing.TB) *ctl.Signals {
	sig, _ := NewSignals(t)
	return sig
}
