package sidecartest

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

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// BenchSessionTimeout is the in-process session's timeout: the one startSidecar
// gives the sidecar (--session-timeout 2s).
const BenchSessionTimeout = 2 * time.Second

// RunWorkers runs `workers` goroutines that share b.N iterations, handed out one
// by one from an atomic counter; op(ctx, w) does one iteration for worker w. It
// times only the workers, reports iterations per second as unit and the CPU
// time per iteration (CPUUse), and fails b (from b's goroutine) with the first
// error; an error stops every worker.
func RunWorkers(b *testing.B, workers int, unit string, op func(ctx context.Context, w int) error) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	b.ResetTimer()
	cpu := StartCPU()
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

// BenchEnv is what one benchmark function shares between its rows: one sidecar
// and one in-process ZooKeeper session on the shared server.
type BenchEnv struct {
	Sc     *Sidecar
	Client *http.Client
	Conn   *zk.Conn
	Root   string
}

func NewBenchEnv(b testing.TB) *BenchEnv {
	b.Helper()
	servers := zktest.Shared(b).Servers()
	root := zktest.Root(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 128
	tr.MaxIdleConnsPerHost = 128 // >= the most concurrent clients: connections are reused
	b.Cleanup(tr.CloseIdleConnections)
	return &BenchEnv{
		Sc:     Start(b, servers, root),
		Client: &http.Client{Transport: tr},
		Conn:   zktest.Connect(b, servers, BenchSessionTimeout),
		Root:   root,
	}
}

// ZKLock is go-zookeeper's lock recipe on root/inproc/name over the shared session.
func (e *BenchEnv) ZKLock(name string) *zk.Lock {
	return zk.NewLock(e.Conn, e.Root+"/inproc/"+name, zk.WorldACL(zk.PermAll))
}

// ZKCycle takes and releases l, checking exclusivity on excl when it is not nil.
func ZKCycle(l *zk.Lock, excl *benchload.Exclusion) error {
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

// CPUUse measures the CPU time of this process (benchmark clients, sidecar and
// go-zookeeper client together) and of the ZooKeeper server it started, on
// Linux: on a machine with two cores, where a row's CPU goes explains it.
type CPUUse struct{ self, zk time.Duration }

func StartCPU() CPUUse { return CPUUse{ProcCPU(os.Getpid()), ProcCPU(ZKPid())} }

// report adds the CPU microseconds per operation since the start.
func (c CPUUse) report(b *testing.B) {
	if self := ProcCPU(os.Getpid()); self > 0 {
		b.ReportMetric(float64(self-c.self)/float64(time.Microsecond)/float64(b.N), "go-cpu-µs/op")
	}
	if zk := ProcCPU(ZKPid()); zk > 0 {
		b.ReportMetric(float64(zk-c.zk)/float64(time.Microsecond)/float64(b.N), "zk-cpu-µs/op")
	}
}

// ZKPid is the pid of the ZooKeeper server this process started (0: none, e.g.
// with ZK_SERVERS).
func ZKPid() int {
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

// ProcCPU is a process's user and system CPU time (0 when unknown).
func ProcCPU(pid int) time.Duration {
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

// InParallel calls f(i) for every i in [from, to), in workers goroutines at
// once, and answers the first error (a worker stops at its first).
func InParallel(from, to, workers int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := from + w; i < to; i += workers {
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}
