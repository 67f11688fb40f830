package kit_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// gatedSource is a Source whose Read counts the reads under way and holds each
// until gate closes.
type gatedSource struct {
	name      string
	now, most *atomic.Int32
	gate      <-chan struct{}
}

func (g *gatedSource) Read(ctx context.Context, ep *zookeeper.Epoch, _ *kit.Watches) (string, error) {
	n := g.now.Add(1)
	defer g.now.Add(-1)
	for m := g.most.Load(); n > m && !g.most.CompareAndSwap(m, n); m = g.most.Load() {
	}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if _, _, err := ep.Exists(ctx, "/"); err != nil {
		return "", err
	}
	return g.name, nil
}
func (g *gatedSource) Reset()                                                  {}
func (g *gatedSource) Uncertain(last string, _ bool, _ kit.Uncertainty) string { return last }
func (g *gatedSource) Same(a, b string) bool                                   { return a == b }

// A burst of followers started at once (the whole picture's first read of
// thousands of things) reads a few at a time, in the session's background
// slots: the others wait in the sidecar, not in the connection's queue, where
// the heartbeat's read would wait behind the whole burst and the session be
// abandoned as expired (issue 22: the status page at 10,000 things on a busy
// machine lost its session seven times in 33 s). Every follower still gets its
// first state.
func TestFollowerBurstReadsInBackgroundSlots(t *testing.T) {
	const followers, slots = 200, 8
	zkc := zktest.Shared(t)
	reg := prometheus.NewRegistry()
	s := zookeepertest.Start(t, zookeeper.Config{Servers: zkc.Servers(), Root: zktest.Root(t), BackgroundReads: slots, Registerer: reg})
	var now, most atomic.Int32
	gate := make(chan struct{})
	names := kit.NewFollowers(s, nil, func(name string) kit.Source[string] {
		return &gatedSource{name: name, now: &now, most: &most, gate: gate}
	})
	var handles []*kit.Follower[string]
	for i := range followers {
		handles = append(handles, names.Follow(fmt.Sprint("thing-", i)))
	}
	defer func() {
		for _, h := range handles {
			h.Close()
		}
	}()
	testutil.Eventually(t, 30*time.Second, "every slot reading and every other follower waiting for one", func() bool {
		return now.Load() == slots && waiting(t, reg) == followers-slots
	})
	close(gate)
	for i, h := range handles {
		if _, ok := h.Await(context.Background(), 30*time.Second, func(st string) bool { return st == fmt.Sprint("thing-", i) }); !ok {
			t.Fatalf("follower %d has no first state", i)
		}
	}
	if m := most.Load(); m > slots {
		t.Fatalf("%d reads under way at once: want at most the %d background slots", m, slots)
	}
}

// waiting is the session's coord_zk_background_reads_waiting (0 before any
// read waited).
func waiting(t *testing.T, reg *prometheus.Registry) float64 {
	v, _ := testutil.MetricValue(t, reg, "coord_zk_background_reads_waiting")
	return v
}
