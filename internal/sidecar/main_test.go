package sidecar_test

import (
	"os"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// TestMain runs the package's tests against the ZooKeeper servers they start.
//
// Run with COORD_PRESSURE_ABUSERS set, the binary is instead the abusers'
// process of BenchmarkGoodClientUnderConnPressure.
func TestMain(m *testing.M) {
	if addr := os.Getenv(abusersEnv); addr != "" {
		os.Exit(runAbusers(addr))
	}
	code := zktest.Main(m)
	sidecartest.RemoveBuiltBinary()
	os.Exit(code)
}
