package queue

import (
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// newTestSession makes a Session on servers with its nodes under root, closed in
// t.Cleanup, and returns once it is connected.
func newTestSession(t *testing.T, servers []string, root string) *zookeeper.Session {
	t.Helper()
	s, err := zookeeper.NewSession(zookeeper.Config{
		Servers: servers, Timeout: 2 * time.Second, Root: root,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	deadline := time.Now().Add(30 * time.Second)
	for s.State() != zookeeper.StateConnected {
		if time.Now().After(deadline) {
			t.Fatal("session never connected")
		}
		select {
		case <-s.Changed():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s
}
