package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
)

// round is what one engine did in one round of a row.
type round struct {
	cycles  int64
	elapsed time.Duration
	// cpu is the CPU time each process spent in the round ("load" is this one).
	cpu map[string]time.Duration
	// zk is the change of ZooKeeper's counters over the round.
	zkRequests, zkFsyncs, zkFsyncMs int64
	// gap is the mean time from one holder's let-go to the next one's grant
	// (hot rows).
	gap time.Duration
}

func (r round) rate() float64 { return float64(r.cycles) / r.elapsed.Seconds() }

// runRound runs r's workers on e for d: each loops cycles until d is over and
// finishes the cycle under way. The first error stops the round.
func runRound(ctx context.Context, o *options, e engine, r row, d time.Duration) (round, error) {
	var x *benchload.Exclusion
	if r.hot {
		x = &benchload.Exclusion{}
	}
	fns, done, err := e.workers(ctx, r, x)
	if err != nil {
		return round{}, err
	}
	checked := false
	defer func() {
		if !checked {
			_ = done()
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cpu0, zk0 := cpuTimes(o.pids), mntr(o.zk)
	start := time.Now()
	deadline := start.Add(d)
	counts := make([]int64, len(fns))
	errs := make(chan error, len(fns))
	var wg sync.WaitGroup
	for w, fn := range fns {
		wg.Go(func() {
			for ctx.Err() == nil && time.Now().Before(deadline) {
				if err := fn(ctx); err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					cancel()
					return
				}
				counts[w]++
			}
		})
	}
	wg.Wait()
	rd := round{elapsed: time.Since(start), cpu: map[string]time.Duration{}}
	cpu1, zk1 := cpuTimes(o.pids), mntr(o.zk)
	close(errs)
	if err := <-errs; err != nil {
		return rd, err
	}
	checked = true
	if err := done(); err != nil {
		return rd, err
	}
	rd.gap = x.MeanGap()
	for _, c := range counts {
		rd.cycles += c
	}
	for k, v := range cpu1 {
		rd.cpu[k] = v - cpu0[k]
	}
	rd.zkRequests = zk1["zk_packets_received"] - zk0["zk_packets_received"]
	rd.zkFsyncs = zk1["zk_cnt_fsynctime"] - zk0["zk_cnt_fsynctime"]
	rd.zkFsyncMs = zk1["zk_sum_fsynctime"] - zk0["zk_sum_fsynctime"]
	return rd, nil
}

// cpuTimes reads the user+system CPU time of this process ("load") and of each
// column's processes, summed.
func cpuTimes(pids map[string][]int) map[string]time.Duration {
	m := map[string]time.Duration{"load": procCPU(os.Getpid())}
	for k, list := range pids {
		for _, pid := range list {
			m[k] += procCPU(pid)
		}
	}
	if list, ok := pids["zookeeper"]; ok {
		m["zookeeper-jit"] = jitCPU(list)
	}
	return m
}

// jitCPU is the CPU time of JVMs' JIT compiler threads ("C1 CompilerThre",
// "C2 CompilerThre"), summed over pids: ZooKeeper compiles its hot paths for
// many seconds after it starts, and that is not the cost of the requests
// measured.
func jitCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/task/"
		tasks, _ := os.ReadDir(dir)
		for _, t := range tasks {
			comm, err := os.ReadFile(dir + t.Name() + "/comm")
			if err == nil && strings.Contains(string(comm), "CompilerThre") {
				if tid, err := strconv.Atoi(t.Name()); err == nil {
					sum += taskCPU(pid, tid)
				}
			}
		}
	}
	return sum
}

// taskCPU is one thread's user and system CPU time (0 when unknown).
func taskCPU(pid, tid int) time.Duration {
	return statCPU("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(tid) + "/stat")
}

// procCPU is a process's user and system CPU time (0 when unknown).
func procCPU(pid int) time.Duration { return statCPU("/proc/" + strconv.Itoa(pid) + "/stat") }

// statCPU reads utime+stime from a /proc stat file.
func statCPU(file string) time.Duration {
	stat, err := os.ReadFile(file)
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

// mntr reads ZooKeeper's integer counters (the mntr four-letter word) of each
// server of servers (host:port,...), summed; a server that does not answer
// adds nothing.
func mntr(servers string) map[string]int64 {
	m := map[string]int64{}
	for _, server := range strings.Split(servers, ",") {
		mntrOne(server, m)
	}
	return m
}

// mntrOne adds one server's mntr counters to m.
func mntrOne(server string, m map[string]int64) {
	conn, err := net.DialTimeout("tcp", server, 2*time.Second)
	if err != nil {
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte("mntr")); err != nil {
		return
	}
	sc := bufio.NewScanner(conn)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), "\t")
		if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
			m[k] += n
		}
	}
}
