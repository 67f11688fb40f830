package main

import (
	"os"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// TestMain runs the package's tests against the ZooKeeper servers they start.
//
// Which tests run in parallel: go test runs every test that does not call
// t.Parallel first, one at a time, and then the parallel ones together (make
// test allows 4 at once). A test is parallel when it is long, mostly waits
// (on servers of its own that it starts, kills or cuts, on Prism, Chromium or
// a script's processes) and reads nothing of the process as a whole (heap,
// goroutines, file limits, default transports, environment). Tests that
// measure the process (load_test.go) stay serial, so nothing runs beside them.
func TestMain(m *testing.M) {
	code := zktest.Main(m)
	sidecartest.RemoveBuiltBinary()
	os.Exit(code)
}
