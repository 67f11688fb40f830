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
	return Start(t, zookeeper.Config{Servers: servers, Root: root})
}

// Start returns a session made with cfg (Timeout default 2s, Logger discarding),
// closed when t ends, once it is connected (failing t after 30s).
func Start(t testing.TB, cfg zookeeper.Config) *zookeeper.Session {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s, err := zookeeper.NewSession(cfg)
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
