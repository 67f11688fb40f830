//go:build !linux

package ctl

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// GuardArg is the hidden subcommand of the guard, which exists on Linux only.
const GuardArg = "__guard"

// GuardBinary is unused outside Linux (no guard there).
var GuardBinary string

// guarded runs the command itself where there is no parent-death signal.
func guarded(command []string) *exec.Cmd { return exec.Command(command[0], command[1:]...) }

// RunGuard refuses: no guard outside Linux.
func RunGuard([]string) int {
	fmt.Fprintln(os.Stderr, "coord-sidecar "+GuardArg+": Linux only")
	return 64
}

// awaitGroupGone returns at once: the wrapper waited for the command itself.
func awaitGroupGone(int, time.Duration) {}
