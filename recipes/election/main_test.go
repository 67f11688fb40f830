package election

import (
	"os"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// grantFor returns a function that grants a lease of a minute from leases.
func grantFor(t *testing.T, leases *kit.Leases) func() *kit.Lease {
	return func() *kit.Lease {
		t.Helper()
		l, err := leases.Grant(time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}
