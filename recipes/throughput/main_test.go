package throughput

import (
	"os"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// newTestSession returns a connected session on servers, rooted at root and
// closed when t ends.
func newTestSession(t *testing.T, servers []string, root string) *zookeeper.Session {
	return zookeepertest.NewSession(t, servers, root)
}
