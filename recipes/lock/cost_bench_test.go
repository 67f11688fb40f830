package lock

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/guid"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// BenchmarkLockCycleCost is what the recipe and ZooKeeper layers cost per lock
// cycle above the bare go-zookeeper calls of the same cycle (issue 41): 16
// clients each acquiring and releasing a lock nobody else wants, through Acquire and
// Release with an implicit lease (recipe), and as the bench's floor makes the
// same requests straight on a go-zookeeper connection (bare: a multi creating
// the stamped contender node, a multi deleting it). Both report the process's
// CPU per cycle (cpu-µs/op, getrusage: user and system, go-zookeeper's
// goroutines included) beside allocations; ns/op is the ZooKeeper round trips.
func BenchmarkLockCycleCost(b *testing.B) {
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	ctx := context.Background()
	b.Run("recipe", func(b *testing.B) {
		s := zookeepertest.NewSession(b, zkc.Servers(), root)
		locks, leases := New(s, prometheus.NewRegistry()), kit.NewLeases(s, nil)
		src := implicitSource{leases}
		cycle := func(name string) error {
			g, err := locks.Acquire(ctx, src, name, "", 0)
			if err != nil {
				return err
			}
			lease, err := leases.Get(g.Lease)
			if err != nil {
				return err
			}
			return locks.Release(ctx, lease, name)
		}
		runCycles(b, cycle)
	})
	b.Run("bare", func(b *testing.B) {
		conn := zktest.Connect(b, zkc.Servers(), 10*time.Second)
		acl := zk.WorldACL(zk.PermAll)
		dir := root + "/bare"
		for _, p := range []string{root, dir} {
			if _, err := conn.Create(p, nil, 0, acl); err != nil && err != zk.ErrNodeExists {
				b.Fatal(err)
			}
		}
		cycle := func(name string) error {
			parent := dir + "/" + name
			for {
				res, err := conn.Multi(
					&zk.CreateRequest{Path: parent + "/_c_" + guid.New() + "-lock-", Acl: acl, Flags: zk.FlagEphemeralSequential},
					&zk.SetDataRequest{Path: parent, Version: -1})
				if err == zk.ErrNoNode {
					if _, err := conn.CreateContainer(parent, nil, zk.FlagContainer, acl); err != nil && err != zk.ErrNodeExists {
						return err
					}
					continue
				}
				if err != nil || res[1].Stat.NumChildren != 1 {
					return fmt.Errorf("stamped create: %v %v", err, res)
				}
				_, err = conn.Multi(&zk.DeleteRequest{Path: res[0].String, Version: -1})
				return err
			}
		}
		runCycles(b, cycle)
	})
}

// runCycles runs b.N cycles on 16 goroutines at once, each on a lock of its
// own (the bench's c16 row), after one cycle on each lock, and reports the
// process's CPU per cycle.
func runCycles(b *testing.B, cycle func(name string) error) {
	const workers = 16
	for i := range workers {
		if err := cycle("cost-" + strconv.Itoa(i)); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	b.SetParallelism((workers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	before := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		name := "cost-" + strconv.Itoa(int(next.Add(1)-1)%workers)
		for pb.Next() {
			if err := cycle(name); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-µs/op")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// implicitSource grants an implicit lease of 30s for each acquisition, as the
// HTTP layer does for a lock taken without lease=.
type implicitSource struct{ leases *kit.Leases }

func (s implicitSource) Lease(ctx context.Context) (*kit.Lease, error) {
	return s.leases.GrantTo(ctx, "", 30*time.Second, true)
}
