package sidecartest

import (
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Main runs a test package's tests against the ZooKeeper servers they start
// (zktest.Main), then removes the command BuildBinary built for them, if any
// (without it every run of a package that builds the command leaves a copy in
// the temporary directory). A package whose tests use sidecartest calls it
// from its TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(sidecartest.Main(m)) }
func Main(m *testing.M) int {
	code := zktest.Main(m)
	RemoveBuiltBinary()
	return code
}
