package main

// Benchmarks of the sidecar's lock against go-zookeeper's in-process lock recipe,
// side by side in one run on the same ZooKeeper server. docs/BENCHMARKS.md
// describes each row; `make bench` runs them.

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// benchSessionTimeout is the in-process session's timeout: the one startSidecar
// gives the sidecar (--session-timeout 2s).
const benchSessionTimeout = 2 * time.Second

// BenchmarkLockCycles: each of `clients` workers acquires and releases its own lock
// ("bench-<i>") in a loop; b.N cycles in total. Rows of the sidecar and of the
// in-process recipe alternate, for each client count.
func BenchmarkLockCycles(b *testing.B) {
	env := newBenchEnv(b)
	for _, clients := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("sidecar/clients=%d", clients), func(b *testing.B) {
			locks := make([]*benchload.SidecarLock, clients)
			for i := range locks {
				locks[i] = benchload.NewSidecarLock(env.client, env.sc.Base+"/v1/locks/bench-"+strconv.Itoa(i))
			}
			runWorkers(b, clients, "cycles/s", func(ctx context.Context, w int) error {
				return locks[w].Cycle(ctx, nil)
			})
		})
		b.Run(fmt.Sprintf("inprocess/clients=%d", clients), func(b *testing.B) {
			locks := make([]*zk.Lock, clients)
			for i := range locks {
				locks[i] = env.zkLock("bench-" + strconv.Itoa(i))
			}
			runWorkers(b, clients, "cycles/s", func(_ context.Context, w int) error {
				return zkCycle(locks[w], nil)
			})
		})
	}
}

// handoffContenders is the number of workers fighting for the one hot lock.
const handoffContenders = 16

// BenchmarkLockHandoff: 16 contenders loop acquire→release on one lock; b.N
// grants in total. Every grant is checked to be exclusive.
func BenchmarkLockHandoff(b *testing.B) {
	env := newBenchEnv(b)
	b.Run("sidecar", func(b *testing.B) {
		locks := make([]*benchload.SidecarLock, handoffContenders)
		for i := range locks {
			locks[i] = benchload.NewSidecarLock(env.client, env.sc.Base+"/v1/locks/bench-hot")
		}
		var excl benchload.Exclusion
		runWorkers(b, handoffContenders, "handoffs/s", func(ctx context.Context, w int) error {
			return locks[w].Cycle(ctx, &excl)
		})
	})
	b.Run("inprocess", func(b *testing.B) {
		locks := make([]*zk.Lock, handoffContenders)
		for i := range locks {
			locks[i] = env.zkLock("bench-hot")
		}
		var excl benchload.Exclusion
		runWorkers(b, handoffContenders, "handoffs/s", func(_ context.Context, w int) error {
			return zkCycle(locks[w], &excl)
		})
	})
}

// runWorkers runs `workers` goroutines that share b.N iterations, handed out one
// by one from an atomic counter; op(ctx, w) does one iteration for worker w. It
// times only the workers, reports iterations per second as unit and the CPU
// time per iteration (cpuUse), and fails b (from b's goroutine) with the first
// error; an error stops every worker.
func runWorkers(b *testing.B, workers int, unit string, op func(ctx context.Context, w int) error) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := startCPU()
	for w := range workers {
		wg.Go(func() {
			for ctx.Err() == nil && next.Add(1) <= int64(b.N) {
				if err := op(ctx, w); err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu.report(b)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit)
}

// benchEnv is what one benchmark function shares between its rows: one sidecar
// and one in-process ZooKeeper session on the shared server.
type benchEnv struct {
	sc     *sidecartest.Sidecar
	client *http.Client
	conn   *zk.Conn
	root   string
}

func newBenchEnv(b testing.TB) *benchEnv {
	b.Helper()
	servers := zktest.Shared(b).Servers()
	root := zktest.Root(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 128
	tr.MaxIdleConnsPerHost = 128 // >= the most concurrent clients: connections are reused
	b.Cleanup(tr.CloseIdleConnections)
	return &benchEnv{
		sc:     sidecartest.Start(b, servers, root),
		client: &http.Client{Transport: tr},
		conn:   zktest.Connect(b, servers, benchSessionTimeout),
		root:   root,
	}
}

// zkLock is go-zookeeper's lock recipe on root/inproc/name over the shared session.
func (e *benchEnv) zkLock(name string) *zk.Lock {
	return zk.NewLock(e.conn, e.root+"/inproc/"+name, zk.WorldACL(zk.PermAll))
}

// zkCycle takes and releases l, checking exclusivity on excl when it is not nil.
func zkCycle(l *zk.Lock, excl *benchload.Exclusion) error {
	if err := l.Lock(); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	err := excl.Enter(0)
	excl.Leave()
	if uerr := l.Unlock(); uerr != nil && err == nil {
		err = fmt.Errorf("unlock: %w", uerr)
	}
	return err
}

// cpuUse measures the CPU time of this process (benchmark clients, sidecar and
// go-zookeeper client together) and of the ZooKeeper server it started, on
// Linux: on a machine with two cores, where a row's CPU goes explains it.
type cpuUse struct{ self, zk time.Duration }

func startCPU() cpuUse { return cpuUse{procCPU(os.Getpid()), procCPU(zkPid())} }

// report adds the CPU microseconds per operation since the start.
func (c cpuUse) report(b *testing.B) {
	if self := procCPU(os.Getpid()); self > 0 {
		b.ReportMetric(float64(self-c.self)/float64(time.Microsecond)/float64(b.N), "go-cpu-µs/op")
	}
	if zk := procCPU(zkPid()); zk > 0 {
		b.ReportMetric(float64(zk-c.zk)/float64(time.Microsecond)/float64(b.N), "zk-cpu-µs/op")
	}
}

// zkPid is the pid of the ZooKeeper server this process started (0: none, e.g.
// with ZK_SERVERS).
func zkPid() int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(f) > 2 && f[1] == strconv.Itoa(os.Getpid()) {
			if cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); bytes.Contains(cmd, []byte("zookeeper")) {
				return pid
			}
		}
	}
	return 0
}

// procCPU is a process's user and system CPU time (0 when unknown).
func procCPU(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ is 100 on Linux
}
