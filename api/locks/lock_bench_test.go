package locks_test

// Benchmarks of the sidecar's lock against go-zookeeper's in-process lock recipe,
// side by side in one run on the same ZooKeeper server. docs/BENCHMARKS.md
// describes each row; `make bench` runs them.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
)

// BenchmarkLockCycles: each of `clients` workers acquires and releases its own lock
// ("bench-<i>") in a loop; b.N cycles in total. Rows of the sidecar and of the
// in-process recipe alternate, for each client count.
func BenchmarkLockCycles(b *testing.B) {
	env := sidecartest.NewBenchEnv(b)
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("sidecar/clients=%d", clients), func(b *testing.B) {
			locks := make([]*benchload.SidecarLock, clients)
			for i := range locks {
				locks[i] = benchload.NewSidecarLock(env.Client, env.Sc.Base+"/v1/locks/bench-"+strconv.Itoa(i))
			}
			sidecartest.RunWorkers(b, clients, "cycles/s", func(ctx context.Context, w int) error {
				return locks[w].Cycle(ctx, nil)
			})
		})
		b.Run(fmt.Sprintf("inprocess/clients=%d", clients), func(b *testing.B) {
			locks := make([]*zk.Lock, clients)
			for i := range locks {
				locks[i] = env.ZKLock("bench-" + strconv.Itoa(i))
			}
			sidecartest.RunWorkers(b, clients, "cycles/s", func(_ context.Context, w int) error {
				return sidecartest.ZKCycle(locks[w], nil)
			})
		})
	}
}

// handoffContenders is the number of workers fighting for the one hot lock.
const handoffContenders = 16

// BenchmarkLockHandoff: 16 contenders loop acquire→release on one lock; b.N
// grants in total. Every grant is checked to be exclusive.
func BenchmarkLockHandoff(b *testing.B) {
	env := sidecartest.NewBenchEnv(b)
	b.Run("sidecar", func(b *testing.B) {
		locks := make([]*benchload.SidecarLock, handoffContenders)
		for i := range locks {
			locks[i] = benchload.NewSidecarLock(env.Client, env.Sc.Base+"/v1/locks/bench-hot")
		}
		var excl benchload.Exclusion
		sidecartest.RunWorkers(b, handoffContenders, "handoffs/s", func(ctx context.Context, w int) error {
			return locks[w].Cycle(ctx, &excl)
		})
	})
	b.Run("inprocess", func(b *testing.B) {
		locks := make([]*zk.Lock, handoffContenders)
		for i := range locks {
			locks[i] = env.ZKLock("bench-hot")
		}
		var excl benchload.Exclusion
		sidecartest.RunWorkers(b, handoffContenders, "handoffs/s", func(_ context.Context, w int) error {
			return sidecartest.ZKCycle(locks[w], &excl)
		})
	})
}

// BenchmarkMultiLock: each of `clients` workers takes its own three locks in
// a loop and lets them go; b.N cycles of all three in total. The multi-lock
// (one POST and one DELETE of /v1/multilocks) alternates with the same three
// locks taken one after the other (three single-lock cycles, each POST and
// DELETE), for each client count.
func BenchmarkMultiLock(b *testing.B) {
	env := sidecartest.NewBenchEnv(b)
	for _, clients := range []int{1, 16} {
		names := func(w int) []string {
			return []string{fmt.Sprintf("multi-%d-a", w), fmt.Sprintf("multi-%d-b", w), fmt.Sprintf("multi-%d-c", w)}
		}
		b.Run(fmt.Sprintf("multilock/clients=%d", clients), func(b *testing.B) {
			locks := make([]*benchload.SidecarLock, clients)
			for w := range locks {
				u := env.Sc.Base + "/v1/multilocks?names=" + strings.Join(names(w), ",")
				locks[w] = &benchload.SidecarLock{Client: env.Client, AcquireURL: u + "&wait=30s", ReleaseURL: u + "&lease="}
			}
			sidecartest.RunWorkers(b, clients, "cycles/s", func(ctx context.Context, w int) error {
				return locks[w].Cycle(ctx, nil)
			})
		})
		b.Run(fmt.Sprintf("three-locks/clients=%d", clients), func(b *testing.B) {
			locks := make([][]*benchload.SidecarLock, clients)
			for w := range locks {
				for _, n := range names(w) {
					locks[w] = append(locks[w], benchload.NewSidecarLock(env.Client, env.Sc.Base+"/v1/locks/"+n))
				}
			}
			sidecartest.RunWorkers(b, clients, "cycles/s", func(ctx context.Context, w int) error {
				for _, l := range locks[w] {
					if err := l.Cycle(ctx, nil); err != nil {
						return err
					}
				}
				return nil
			})
		})
	}
}
