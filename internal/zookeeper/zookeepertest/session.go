// Package zookeepertest makes ZooKeeper sessions for tests.
package zookeepertest

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// NewSession returns a connected session (timeout 2s) on servers under root,
// closed when t ends.
func NewSession(t testing.TB, servers []string, root string) *zookeeper.Session {
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
