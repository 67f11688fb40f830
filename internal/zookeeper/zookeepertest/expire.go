package zookeepertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Expire has ZooKeeper expire s's current session behind a cut connection,
// as a long network partition does: cut (a faultproxy's Cut, between s and
// every server it dials) is called, then Expire waits until an ephemeral
// node of the session, watched from a session of its own on servers, is gone
// (the ensemble expired the session: a suspension, however long, does not
// lose it any more), calls restore, and returns the lost epoch once s has
// been told (ZooKeeper answers the reconnect with an expiry). Its waits are
// generous (a minute each).
func Expire(t testing.TB, s *zookeeper.Session, servers []string, cut, restore func()) *zookeeper.Epoch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep, err := s.WaitCurrent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	marker := fmt.Sprintf("%s/expire-marker-0x%x", s.Root(), ep.ID())
	if err := ep.EnsurePersistent(ctx, s.Root()); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.Create(ctx, marker, nil, zookeeper.Ephemeral); err != nil {
		t.Fatal(err)
	}
	observer := NewSession(t, servers, s.Root())
	cut()
	testutil.Eventually(t, time.Minute, "ZooKeeper expires the cut session", func() bool {
		oep, err := observer.Current()
		if err != nil {
			return false
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		ok, _, err := oep.Exists(rctx, marker)
		return err == nil && !ok
	})
	restore()
	testutil.Eventually(t, time.Minute, "the session told of its expiry", ep.IsLost)
	return ep
}
