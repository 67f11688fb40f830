package main

// Benchmarks of elections (issue 3): what one election followed by 10,000
// server-sent event subscribers costs in latency and memory, with the sidecar
// run as a process of its own. The benchmark runs a fixed experiment (10,000
// subscribers × 20 changes) once per -count round, whatever -benchtime says
// (see sidecartest.RunOnce); docs/BENCHMARKS.md explains the rows. How fast
// leadership fails over is api/elections' BenchmarkElectionFailover.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

const (
	// fanoutSubscribers and fanoutChanges size BenchmarkElectionFanout10k.
	fanoutSubscribers = 10_000
	fanoutChanges     = 20
	// fanoutDialers is how many connections are being opened at once.
	fanoutDialers = 64
)

// BenchmarkElectionFanout10k: one sidecar, run as a process of its own (built
// with go build) so that its memory can be read from /proc; 10,000 subscribers
// of one election's events, each a plain TCP connection with a hand-written
// HTTP/1.1 GET read by one goroutine. 21 candidates are enrolled first; then 20
// times the leader's lease is revoked and, per subscriber, the time is taken from
// just before the revoke request is sent until that subscriber has read the
// `leader` event naming the next candidate. It reports the latency quantiles over
// all 200,000 (subscriber, change) pairs and the sidecar's resident memory per
// subscriber (VmRSS with 10,000 subscribers after the changes, minus VmRSS
// before the first subscriber, over 10,000), and the Go heap and stacks in use per
// subscriber as the sidecar's /metrics reports them.
//
// With ELECTION_BENCH_INPROCESS=1 the sidecar runs in the benchmark's process
// instead (with as many subscribers as the hard limit on open files allows, up to
// 10,000), so that profiles see it: -cpuprofile and -memprofile, and
// ELECTION_BENCH_CPUPROFILE=file for a CPU profile of the 20 changes alone (not
// with -cpuprofile), ELECTION_BENCH_HEAPPROFILE=file for a heap profile with
// every subscriber connected. The memory figures then include the clients and
// are only logged.
func BenchmarkElectionFanout10k(b *testing.B) { sidecartest.RunOnce(b, &ebFanoutLast, ebFanout10k) }

var ebFanoutLast *sidecartest.BenchResult

func ebFanout10k(b *testing.B) sidecartest.BenchResult {
	if runtime.GOOS != "linux" {
		b.Skip("reads memory and CPU time from /proc")
	}
	inProcess := os.Getenv("ELECTION_BENCH_INPROCESS") != ""
	n := ebFanoutSubscribers(b, inProcess)
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	var car *sidecartest.Sidecar
	pid := 0 // of the sidecar process; 0 in process
	if inProcess {
		car = sidecartest.Start(b, zkc.Servers(), root)
	} else {
		car, pid = ebStartProcess(b, zkc.Servers(), root)
	}
	const election = "fanout"

	leases := make([]string, fanoutChanges+1)
	for k := range leases {
		leases[k] = sidecartest.Str(sidecartest.Campaign(b, car, election, "c"+strconv.Itoa(k), "ttl=30m").Body["lease"])
	}
	if r := car.Must(b, http.StatusOK, http.MethodGet, "/v1/elections/"+election); len(r.Body["candidates"].([]any)) != len(leases) {
		b.Fatalf("election before the subscribers: %s", r.Raw)
	}
	time.Sleep(500 * time.Millisecond)
	before := ebProbe(b, car, pid)

	fan := newEBFanout(n, fanoutChanges)
	b.Cleanup(fan.close)
	if err := fan.connect(strings.TrimPrefix(car.Base, "http://"), "/v1/elections/"+election+"/events"); err != nil {
		b.Fatal(err)
	}
	if err := fan.wait(&fan.ready, 60*time.Second); err != nil {
		b.Fatalf("initial state: %v", err)
	}
	b.Logf("%d subscribers connected and served their first event in %s (first data line %d bytes)",
		n, time.Since(fan.t0).Round(time.Millisecond), fan.firstLine.Load())
	time.Sleep(500 * time.Millisecond)
	idle := ebProbe(b, car, pid)

	stopProfile := ebStartCPUProfile(b, os.Getenv("ELECTION_BENCH_CPUPROFILE"))
	for k := range fanoutChanges {
		fan.start[k] = int64(time.Since(fan.t0))
		car.Must(b, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+leases[k])
		if err := fan.wait(&fan.got[k], 30*time.Second); err != nil {
			b.Fatalf("change %d (c%d leads): %v", k, k+1, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stopProfile()
	changed := ebProbe(b, car, pid) // CPU right after the changes
	time.Sleep(400 * time.Millisecond)
	after := ebProbe(b, car, pid)
	if path := os.Getenv("ELECTION_BENCH_HEAPPROFILE"); path != "" {
		ebWriteHeapProfile(b, path)
	}
	if err := fan.failed(); err != nil {
		b.Fatal(err)
	}
	fan.close()

	all := make([]time.Duration, 0, n*fanoutChanges)
	last := make([]time.Duration, 0, fanoutChanges) // per change, until the last subscriber
	for k := range fanoutChanges {
		var slowest time.Duration
		for s := range n {
			d := time.Duration(fan.recv[k*n+s] - fan.start[k])
			all = append(all, d)
			slowest = max(slowest, d)
		}
		last = append(last, slowest)
	}
	q, ql := sidecartest.Quantiles(all), sidecartest.Quantiles(last)
	lasts := make([]string, len(last))
	for k, d := range last {
		lasts[k] = strconv.FormatFloat(sidecartest.Millis(d), 'f', 0, 64)
	}
	b.Logf("per change, ms until the last subscriber had it: %s", strings.Join(lasts, " "))
	perSub := func(bytes int64) float64 { return float64(bytes) / 1024 / float64(n) }
	b.Logf("delivery over %d pairs: min %s, p50 %s, p90 %s, p99 %s, max %s; last subscriber per change: p50 %s, max %s",
		len(all), q.Min, q.P50, q.At(0.90), q.P99, q.Max, ql.P50, ql.Max)
	who := "sidecar"
	if inProcess {
		who = "benchmark process (sidecar and clients)"
	}
	b.Logf("%s: VmRSS %d KiB before, %d KiB with %d idle subscribers, %d KiB after %d changes; Go heap in use %d → %d KiB, stacks in use %d → %d KiB; goroutines %d → %d",
		who, before.rss>>10, idle.rss>>10, n, after.rss>>10, fanoutChanges,
		before.heap>>10, after.heap>>10, before.stack>>10, after.stack>>10, before.goroutines, after.goroutines)
	if !inProcess {
		b.Logf("during the %d changes: CPU of the sidecar %s, of the benchmark process (clients) %s; %d GC cycles in the sidecar",
			fanoutChanges, (changed.cpu - idle.cpu).Round(time.Millisecond), (changed.selfCPU - idle.selfCPU).Round(time.Millisecond), changed.gcs-idle.gcs)
	}
	metrics := map[string]float64{
		"p50-ms": sidecartest.Millis(q.P50),
		"p99-ms": sidecartest.Millis(q.P99),
		"max-ms": sidecartest.Millis(q.Max),
	}
	if inProcess {
		metrics["subscribers"] = float64(n)
	} else {
		metrics["KiB/subscriber"] = perSub(after.rss - before.rss)
		metrics["idle-KiB/subscriber"] = perSub(idle.rss - before.rss)
		metrics["heap+stack-KiB/subscriber"] = perSub(after.heap + after.stack - before.heap - before.stack)
	}
	return sidecartest.BenchResult{Samples: len(all), Mean: q.Mean, Metrics: metrics}
}

// ebFanoutSubscribers raises the limit on open files for the fan-out and
// returns its number of subscribers: fanoutSubscribers, or in process (this
// process holds both ends of every connection) as many as the hard limit on
// open files allows, up to fanoutSubscribers.
func ebFanoutSubscribers(b *testing.B, inProcess bool) int {
	n := fanoutSubscribers
	if !inProcess {
		ebRaiseOpenFiles(b, uint64(n+1024))
		return n
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Max < 2*1024 {
		b.Fatalf("open files: hard limit %d", lim.Max)
	}
	if most := (lim.Max - 1024) / 2; most < uint64(n) {
		n = int(most)
	}
	ebRaiseOpenFiles(b, uint64(2*n+1024))
	return n
}

// ebSample is what ebProbe reads.
type ebSample struct {
	rss         int64         // the sidecar's VmRSS (this process's when in process)
	heap, stack int64         // Go heap and stacks in use, from /metrics
	goroutines  int64         // from /metrics
	gcs         int64         // completed GC cycles, from /metrics
	cpu         time.Duration // the sidecar process's user+system CPU (0 in process)
	selfCPU     time.Duration // this process's user+system CPU
}

// ebProbe samples the sidecar's memory and CPU: pid is its process, or 0 when
// it runs in this one.
func ebProbe(b testing.TB, car *sidecartest.Sidecar, pid int) ebSample {
	b.Helper()
	var s ebSample
	m := sidecartest.Metrics(b, car, "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes", "go_goroutines", "go_gc_duration_seconds_count")
	s.heap, s.stack, s.goroutines, s.gcs = int64(m[0]), int64(m[1]), int64(m[2]), int64(m[3])
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		s.selfCPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if pid == 0 {
		pid = os.Getpid()
	} else {
		s.cpu = ebProcessCPU(b, pid)
	}
	s.rss = ebRSS(b, pid)
	return s
}

// ebProcessCPU reads a process's user+system CPU time from /proc/<pid>/stat
// (in clock ticks of 1/100 s, as on every Linux this runs on).
func ebProcessCPU(b testing.TB, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command is in parentheses and may hold any character; after it come
	// state (field 3), ..., utime (14) and stime (15).
	i := strings.LastIndex(string(raw), ") ")
	f := strings.Fields(string(raw[i+2:]))
	if i < 0 || len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// ebStartCPUProfile starts a CPU profile into path unless path is empty, and
// returns what stops it.
func ebStartCPUProfile(b testing.TB, path string) (stop func()) {
	b.Helper()
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			f.Close()
		})
	}
	b.Cleanup(stop)
	return stop
}

// ebWriteHeapProfile writes this process's heap profile (after a GC) to path.
func ebWriteHeapProfile(b testing.TB, path string) {
	b.Helper()
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// ebRaiseOpenFiles raises the soft limit on open files to at least n (Go raises it
// to the hard limit at start on Linux), and the hard limit too when it is below n
// and the process may (root).
func ebRaiseOpenFiles(b testing.TB, n uint64) {
	b.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur >= n {
		return
	}
	lim.Cur, lim.Max = n, max(lim.Max, n)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("raise the open-file limit to %d: %v (raise it with ulimit -n)", n, err)
	}
}

// ebStartProcess builds the sidecar and runs it as a process of its own against
// servers with root; it is stopped with SIGTERM (then killed) in Cleanup, which
// also logs the sidecar's warnings and errors if the benchmark failed. It returns
// the sidecar and its pid.
func ebStartProcess(b testing.TB, servers []string, root string) (*sidecartest.Sidecar, int) {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "coord-sidecar")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	// The default session timeout (10s), as deployed: on a small shared machine
	// the load of 10,000 connections must not cost the session and its leases.
	cmd := exec.Command(bin, "--listen", addr, "--zk", strings.Join(servers, ","), "--zk-root", root)
	logs := &ebLogs{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if b.Failed() {
			b.Logf("the sidecar's warnings and errors:\n%s", logs.notable())
		}
	})
	car := &sidecartest.Sidecar{Base: "http://" + addr}
	car.WaitReady(b)
	return car, cmd.Process.Pid
}

// ebLogs keeps a sidecar process's log lines of level WARN and ERROR.
type ebLogs struct {
	mu      sync.Mutex
	partial []byte
	kept    []string
}

func (l *ebLogs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(l.partial[:i])
		l.partial = l.partial[i+1:]
		if !strings.Contains(line, `"level":"INFO"`) && !strings.Contains(line, `"level":"DEBUG"`) {
			l.kept = append(l.kept, line)
		}
	}
}

// notable returns the last 50 kept lines.
func (l *ebLogs) notable() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.kept[max(0, len(l.kept)-50):], "\n")
}

// ebRSS reads a process's resident set size (VmRSS) in bytes.
func ebRSS(b testing.TB, pid int) int64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

// ebFanout is n subscribers of one election's events, each a raw TCP connection
// read by one goroutine, recording when each of them reads the event of each
// change. Change k is the one after which candidate c<k+1> leads; c0 leads first.
type ebFanout struct {
	n, changes int
	t0         time.Time
	// mark precedes the number k of "c<k>" in a data line: state k (0 first,
	// then change k-1 done); leaderMark unless set before connect.
	mark []byte

	start []int64        // per change: ns since t0 just before the change was triggered
	recv  []int64        // [change*n + subscriber]: ns since t0 the subscriber read the change
	got   []atomic.Int64 // per change: subscribers that read it
	ready atomic.Int64   // subscribers that read their first event (c0 leads)

	firstLine atomic.Int64 // size of the first data line read, for the log

	mu      sync.Mutex
	conns   []net.Conn
	closing bool
	err     error // first failure of a subscriber before closing
	readers sync.WaitGroup
}

func newEBFanout(n, changes int) *ebFanout {
	return &ebFanout{
		n: n, changes: changes, t0: time.Now(), mark: leaderMark,
		start: make([]int64, changes), recv: make([]int64, changes*n), got: make([]atomic.Int64, changes),
		conns: make([]net.Conn, 0, n),
	}
}

// connect opens the n connections (fanoutDialers at a time) and starts their
// readers; it returns the first error.
func (f *ebFanout) connect(addr, path string) error {
	request := []byte("GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAccept: text/event-stream\r\n\r\n")
	ids := make(chan int)
	errs := make(chan error, fanoutDialers)
	var dialers sync.WaitGroup
	for range fanoutDialers {
		dialers.Go(func() {
			for i := range ids {
				conn, err := ebDial(addr)
				if err == nil {
					_, err = conn.Write(request)
				}
				if err == nil {
					err = f.add(conn)
				}
				if err != nil {
					if conn != nil {
						conn.Close()
					}
					errs <- fmt.Errorf("subscriber %d: %w", i, err)
					for range ids { // drain: let the feeder finish
					}
					return
				}
				f.readers.Go(func() { f.read(i, conn) })
			}
		})
	}
	for i := range f.n {
		ids <- i
	}
	close(ids)
	dialers.Wait()
	close(errs)
	return <-errs
}

// ebDial dials addr, retrying briefly when the listen backlog overflows.
func ebDial(addr string) (net.Conn, error) {
	var err error
	for attempt := range 5 {
		var conn net.Conn
		if conn, err = net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
			return conn, nil
		}
		time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
	}
	return nil, err
}

func (f *ebFanout) add(conn net.Conn) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closing {
		return errors.New("closing")
	}
	f.conns = append(f.conns, conn)
	return nil
}

// leaderMark precedes the leader's candidate id in an election event's data.
var leaderMark = []byte(`"leader":{"candidate":"c`)

// read is subscriber i's reader: it parses the sidecartest.Response and records, for each
// data line, when it first names each leader.
func (f *ebFanout) read(i int, conn net.Conn) {
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		f.fail(fmt.Errorf("subscriber %d: %w", i, err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.fail(fmt.Errorf("subscriber %d: status %d", i, resp.StatusCode))
		return
	}
	body := bufio.NewReaderSize(resp.Body, 4096) // the event stream, chunks decoded
	var long []byte                              // a line longer than body's buffer
	seen := -1                                   // the newest change read
	for {
		line, err := body.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			f.fail(fmt.Errorf("subscriber %d: %w", i, err))
			return
		}
		if long != nil {
			line = append(long, line...)
			long = long[:0:0]
		}
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		at := bytes.Index(line, f.mark)
		if at < 0 {
			continue
		}
		rest := line[at+len(f.mark):]
		end := bytes.IndexByte(rest, '"')
		if end < 0 {
			continue
		}
		c, err := strconv.Atoi(string(rest[:end]))
		if err != nil {
			continue
		}
		now := int64(time.Since(f.t0))
		switch k := c - 1; {
		case c == 0:
			if seen < 0 {
				seen = 0
				f.firstLine.CompareAndSwap(0, int64(len(line)))
				f.ready.Add(1)
			}
		case k >= 0 && k < f.changes && k+1 > seen:
			seen = k + 1
			f.recv[k*f.n+i] = now
			f.got[k].Add(1)
		}
	}
}

// fail records the first error of a subscriber, unless the fan-out is closing.
func (f *ebFanout) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closing && f.err == nil {
		f.err = err
	}
}

func (f *ebFanout) failed() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// wait polls counter until every subscriber counted, a subscriber failed, or
// within passed.
func (f *ebFanout) wait(counter *atomic.Int64, within time.Duration) error {
	deadline := time.Now().Add(within)
	for counter.Load() < int64(f.n) {
		if err := f.failed(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d subscribers within %s", counter.Load(), f.n, within)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// close closes every connection and waits for every reader. It is idempotent.
func (f *ebFanout) close() {
	f.mu.Lock()
	f.closing = true
	conns := f.conns
	f.conns = nil
	f.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
	f.readers.Wait()
}
