package sidecar_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// BenchmarkGoodClientUnderConnPressure (issue 40): a good client's lock
// cycle (acquire, release; each request on a new connection, as a client
// whose connections were closed under it, or a new one) quiet, then while
// 1,500 careless clients keep idle kept-alive connections (each made one
// request; reconnecting when closed) and 2,000 slowloris clients trickle
// their headers, against a sidecar with --max-conns 1500: p50 and p99 of a
// cycle in each phase, and of its requests' parts (connect: the TCP
// handshake, which the kernel completes before the sidecar accepts; wait:
// from the request written to the answer's first byte, which includes the
// time the connection waits to be accepted). The abusers run in a process of
// their own (this test binary run again, see runAbusers), as they would on
// another host; the sidecar and the good client run in the benchmark's.
// Before issue 40 the good client made no cycle at all under the idle
// connections. PRESSURE_IDLE and PRESSURE_SLOWLORIS change the numbers of
// abusers, PRESSURE_PHASE the length of each phase (default 10s).
func BenchmarkGoodClientUnderConnPressure(b *testing.B) {
	var last *sidecartest.BenchResult
	sidecartest.RunOnce(b, &last, pressureExperiment)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// goodSample is what the good client measured in a phase: its cycles, and
// its requests' connect and wait times.
type goodSample struct {
	cycles, connect, wait []time.Duration
	failed                int
}

func pressureExperiment(b *testing.B) sidecartest.BenchResult {
	idle, slow := envInt("PRESSURE_IDLE", 1500), envInt("PRESSURE_SLOWLORIS", 2000)
	phase := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PRESSURE_PHASE")); err == nil && d > 0 {
		phase = d
	}
	zkc := zktest.Shared(b)
	car := sidecartest.Start(b, zkc.Servers(), zktest.Root(b), "--max-conns", "1500")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	run := func(d time.Duration) (s goodSample) {
		var mu sync.Mutex
		var dialed, wrote time.Time
		trace := &httptrace.ClientTrace{
			ConnectStart: func(string, string) { mu.Lock(); dialed = time.Now(); mu.Unlock() },
			ConnectDone: func(string, string, error) {
				mu.Lock()
				s.connect = append(s.connect, time.Since(dialed))
				mu.Unlock()
			},
			WroteRequest: func(httptrace.WroteRequestInfo) { mu.Lock(); wrote = time.Now(); mu.Unlock() },
			GotFirstResponseByte: func() {
				mu.Lock()
				s.wait = append(s.wait, time.Since(wrote))
				mu.Unlock()
			},
		}
		tctx := httptrace.WithClientTrace(context.Background(), trace)
		cycle := func() (time.Duration, error) {
			start := time.Now()
			r, err := sidecartest.DoWith(tctx, client, car.Base, http.MethodPost, "/v1/locks/good?ttl=30s&wait=30s", nil)
			if err != nil || r.Status != http.StatusCreated {
				return 0, err
			}
			r, err = sidecartest.DoWith(tctx, client, car.Base, http.MethodDelete, "/v1/locks/good?lease="+sidecartest.Str(r.Body["lease"]), nil)
			if err != nil || r.Status != http.StatusNoContent {
				return 0, err
			}
			return time.Since(start), nil
		}
		for end := time.Now().Add(d); time.Now().Before(end); {
			took, err := cycle()
			if err != nil || took == 0 {
				s.failed++
				continue
			}
			s.cycles = append(s.cycles, took)
		}
		mu.Lock()
		defer mu.Unlock()
		return s
	}
	run(time.Second) // warm-up
	quiet := run(phase)

	ab := startAbusers(b, car.M.Addr(), idle, slow)
	// The pressure builds up: the idle clients have been answered once each
	// on average, and every slowloris client has connected.
	for deadline := time.Now().Add(time.Minute); (ab.connected.Load() < int64(idle) || ab.slowDials.Load() < int64(slow)) &&
		time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	pressed := run(phase)
	dials := ab.stop(b)

	q, p := sidecartest.Quantiles(quiet.cycles), sidecartest.Quantiles(pressed.cycles)
	pc, pw := sidecartest.Quantiles(pressed.connect), sidecartest.Quantiles(pressed.wait)
	b.Logf("quiet: %d cycles (%d failed), p50 %s p99 %s; pressed by %d idle and %d slowloris connections at --max-conns 1500: "+
		"%d cycles (%d failed), p50 %s p99 %s; a request's connect p50 %s p99 %s max %s, wait for the first byte p50 %s p99 %s max %s; abusers: %s",
		len(quiet.cycles), quiet.failed, q.P50, q.P99, idle, slow, len(pressed.cycles), pressed.failed, p.P50, p.P99,
		pc.P50, pc.P99, pc.Max, pw.P50, pw.P99, pw.Max, dials)
	return sidecartest.BenchResult{Samples: max(1, len(pressed.cycles)), Mean: p.Mean, Metrics: map[string]float64{
		"quiet-p50-ms": sidecartest.Millis(q.P50), "quiet-p99-ms": sidecartest.Millis(q.P99),
		"pressed-p50-ms": sidecartest.Millis(p.P50), "pressed-p99-ms": sidecartest.Millis(p.P99),
		"pressed-connect-p99-ms": sidecartest.Millis(pc.P99), "pressed-wait-p99-ms": sidecartest.Millis(pw.P99),
		"pressed-failed": float64(pressed.failed),
	}}
}

// abusersEnv names the sidecar's address for this test binary run as the
// abusers' process (TestMain hands it to runAbusers).
const abusersEnv = "COORD_PRESSURE_ABUSERS"

// abusers is the abusers' process as the benchmark sees it: connected counts
// the idle clients' answered requests, slowDials the slowloris clients'
// connections, as the process reports them.
type abusers struct {
	cmd       *exec.Cmd
	stdin     io.Closer
	connected atomic.Int64
	slowDials atomic.Int64
	last      atomic.Value // string: the process's last report
	read      sync.WaitGroup
}

// startAbusers runs this test binary again as the abusers' process against
// addr; stop ends it.
func startAbusers(b *testing.B, addr string, idle, slow int) *abusers {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), abusersEnv+"="+addr, "PRESSURE_IDLE="+strconv.Itoa(idle), "PRESSURE_SLOWLORIS="+strconv.Itoa(slow))
	cmd.Stderr = os.Stderr
	cmd.WaitDelay = 10 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	a := &abusers{cmd: cmd, stdin: stdin}
	a.last.Store("")
	a.read.Add(1)
	go func() {
		defer a.read.Done()
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			a.last.Store(line)
			if f := strings.Fields(line); len(f) == 6 && f[0] == "connected" {
				n, _ := strconv.ParseInt(f[1], 10, 64)
				a.connected.Store(n)
				n, _ = strconv.ParseInt(f[5], 10, 64)
				a.slowDials.Store(n)
			}
		}
	}()
	return a
}

// stop ends the abusers' process (closing its stdin), waits for it and
// returns its last report.
func (a *abusers) stop(b *testing.B) string {
	a.stdin.Close()
	a.read.Wait()
	if err := a.cmd.Wait(); err != nil {
		b.Errorf("the abusers' process: %v", err)
	}
	return a.last.Load().(string)
}

// runAbusers is the abusers' process: PRESSURE_IDLE idle clients and
// PRESSURE_SLOWLORIS slowloris clients against addr until its stdin ends. It
// writes "connected N idle-dials I slowloris-dials S" every 100 ms: N the idle
// clients' answered requests, I and S the connections each kind opened.
func runAbusers(addr string) int {
	idle, slow := envInt("PRESSURE_IDLE", 1500), envInt("PRESSURE_SLOWLORIS", 2000)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var connected, idleDials, slowDials atomic.Int64
	for range idle {
		wg.Add(1)
		go func() { defer wg.Done(); idleAbuser(ctx, addr, &connected, &idleDials) }()
	}
	for range slow {
		wg.Add(1)
		go func() { defer wg.Done(); slowlorisAbuser(ctx, addr, &slowDials) }()
	}
	report := func() {
		fmt.Printf("connected %d idle-dials %d slowloris-dials %d\n", connected.Load(), idleDials.Load(), slowDials.Load())
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				report()
			}
		}
	}()
	_, _ = io.Copy(io.Discard, os.Stdin) // until the benchmark closes it
	cancel()
	wg.Wait()
	report()
	return 0
}

// idleAbuser keeps a connection to addr after one request (GET /healthz),
// sending nothing more, and opens another 10 ms after the server closes it,
// until ctx ends; connected counts the answered requests, dials the
// connections opened.
func idleAbuser(ctx context.Context, addr string, connected, dials *atomic.Int64) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		dials.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		br := bufio.NewReader(c)
		if _, err := io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err == nil {
			if resp, err := http.ReadResponse(br, nil); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				connected.Add(1)
				_, _ = br.ReadByte() // idle until the server closes it
			}
		}
		stop()
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
}

// slowlorisAbuser sends a request's headers a line a second, never ending
// them, and reconnects at once when the server closes it, until ctx ends;
// dials counts the connections opened.
func slowlorisAbuser(ctx context.Context, addr string, dials *atomic.Int64) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		dials.Add(1)
		stop := context.AfterFunc(ctx, func() { c.Close() })
		_, err = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
		for err == nil && ctx.Err() == nil {
			time.Sleep(time.Second)
			_, err = io.WriteString(c, "X-a: b\r\n")
		}
		stop()
		c.Close()
	}
}
