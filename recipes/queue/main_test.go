package queue

import (
	"os"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// newTestSession makes a Session on servers with its nodes under root, closed in
// t.Cleanup, and returns once it is connected.
func newTestSession(t testing.TB, servers []string, root string) *zookeeper.Session {
	return zookeepertest.NewSession(t, servers, root)
}
