package main

// Benchmarks of the sidecar's lock against go-zookeeper's in-process lock recipe,
// side by side in one run on the same ZooKeeper server. docs/BENCHMARKS.md
// describes each row; `make bench` runs them.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

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
			locks := make([]*httpLock, clients)
			for i := range locks {
				locks[i] = env.httpLock("bench-" + strconv.Itoa(i))
			}
			runWorkers(b, clients, "cycles/s", func(ctx context.Context, w int) error {
				return locks[w].cycle(ctx, nil)
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
		locks := make([]*httpLock, handoffContenders)
		for i := range locks {
			locks[i] = env.httpLock("bench-hot")
		}
		var excl exclusion
		runWorkers(b, handoffContenders, "handoffs/s", func(ctx context.Context, w int) error {
			return locks[w].cycle(ctx, &excl)
		})
	})
	b.Run("inprocess", func(b *testing.B) {
		locks := make([]*zk.Lock, handoffContenders)
		for i := range locks {
			locks[i] = env.zkLock("bench-hot")
		}
		var excl exclusion
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
	sc     *sidecar
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
		sc:     startSidecar(b, servers, root),
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
func zkCycle(l *zk.Lock, excl *exclusion) error {
	if err := l.Lock(); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	err := excl.enter(0)
	excl.leave()
	if uerr := l.Unlock(); uerr != nil && err == nil {
		err = fmt.Errorf("unlock: %w", uerr)
	}
	return err
}

// httpLock is one client of the sidecar's lock `name`, as a shell script with
// curl would use it: an implicit lease per acquisition.
type httpLock struct {
	client     *http.Client
	acquireURL string
	releaseURL string // the lease id is appended
}

func (e *benchEnv) httpLock(name string) *httpLock {
	u := e.sc.base + "/v1/locks/" + name
	return &httpLock{client: e.client, acquireURL: u + "?wait=30s", releaseURL: u + "?lease="}
}

// cycle acquires (POST, 201) and releases (DELETE, 204) the lock, checking
// exclusivity and fencing-token order on excl when it is not nil.
func (h *httpLock) cycle(ctx context.Context, excl *exclusion) error {
	var grant struct {
		Lease        string `json:"lease"`
		FencingToken int64  `json:"fencingToken"`
	}
	if err := h.send(ctx, http.MethodPost, h.acquireURL, http.StatusCreated, &grant); err != nil {
		return err
	}
	err := excl.enter(grant.FencingToken)
	excl.leave()
	if rerr := h.send(ctx, http.MethodDelete, h.releaseURL+url.QueryEscape(grant.Lease), http.StatusNoContent, nil); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// send makes one request and decodes a JSON answer into out (when not nil). The
// body is always read to its end so that the connection is reused.
func (h *httpLock) send(ctx context.Context, method, u string, want int, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, u, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: bad JSON %q: %w", method, u, raw, err)
		}
	}
	return nil
}

// exclusion checks, for the holders of one lock, that no two hold it at once and,
// when tokens are given (> 0), that fencing tokens strictly increase. A nil
// *exclusion checks nothing.
type exclusion struct {
	holders   atomic.Int32
	lastToken atomic.Int64 // written only by the holder
}

func (x *exclusion) enter(token int64) error {
	if x == nil {
		return nil
	}
	if n := x.holders.Add(1); n != 1 {
		return fmt.Errorf("%d holders at once", n)
	}
	if token > 0 {
		if last := x.lastToken.Load(); token <= last {
			return fmt.Errorf("fencing token %d after %d", token, last)
		}
		x.lastToken.Store(token)
	}
	return nil
}

func (x *exclusion) leave() {
	if x != nil {
		x.holders.Add(-1)
	}
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
