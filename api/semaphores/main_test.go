package semaphores_test

import (
	"os"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
)

// TestMain runs the package's tests against the ZooKeeper servers they start.
func TestMain(m *testing.M) { os.Exit(sidecartest.Main(m)) }
