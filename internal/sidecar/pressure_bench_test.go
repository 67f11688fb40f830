package sidecar_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
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
// cycle in each phase. Before issue 40 the good client made no cycle at all
// under the idle connections. PRESSURE_IDLE and PRESSURE_SLOWLORIS change the
// numbers of abusers, PRESSURE_PHASE the length of each phase (default 10s).
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

func pressureExperiment(b *testing.B) sidecartest.BenchResult {
	idle, slow := envInt("PRESSURE_IDLE", 1500), envInt("PRESSURE_SLOWLORIS", 2000)
	phase := 10 * time.Second
	if d, err := time.ParseDuration(os.Getenv("PRESSURE_PHASE")); err == nil && d > 0 {
		phase = d
	}
	zkc := zktest.Shared(b)
	car := sidecartest.Start(b, zkc.Servers(), zktest.Root(b), "--max-conns", "1500")
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	cycle := func(ctx context.Context) (time.Duration, error) {
		start := time.Now()
		r, err := sidecartest.DoWith(ctx, client, car.Base, http.MethodPost, "/v1/locks/good?ttl=30s&wait=30s", nil)
		if err != nil || r.Status != http.StatusCreated {
			return 0, err
		}
		r, err = sidecartest.DoWith(ctx, client, car.Base, http.MethodDelete, "/v1/locks/good?lease="+sidecartest.Str(r.Body["lease"]), nil)
		if err != nil || r.Status != http.StatusNoContent {
			return 0, err
		}
		return time.Since(start), nil
	}
	run := func(d time.Duration) (sample []time.Duration, failed int) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		for ctx.Err() == nil {
			took, err := cycle(context.Background())
			if err != nil || took == 0 {
				failed++
				continue
			}
			sample = append(sample, took)
		}
		return sample, failed
	}
	run(time.Second) // warm-up
	quiet, quietFailed := run(phase)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var connected atomic.Int64
	addr := car.M.Addr()
	for range idle {
		wg.Add(1)
		go func() { defer wg.Done(); idleAbuser(ctx, addr, &connected) }()
	}
	for range slow {
		wg.Add(1)
		go func() { defer wg.Done(); slowlorisAbuser(ctx, addr) }()
	}
	// The pressure builds up: most idle clients have been answered once.
	for deadline := time.Now().Add(time.Minute); connected.Load() < int64(idle)*9/10 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	pressed, pressedFailed := run(phase)
	cancel()
	wg.Wait()

	q, p := sidecartest.Quantiles(quiet), sidecartest.Quantiles(pressed)
	b.Logf("quiet: %d cycles (%d failed), p50 %s p99 %s; pressed by %d idle and %d slowloris connections at --max-conns 1500: %d cycles (%d failed), p50 %s p99 %s",
		len(quiet), quietFailed, q.P50, q.P99, idle, slow, len(pressed), pressedFailed, p.P50, p.P99)
	return sidecartest.BenchResult{Samples: max(1, len(pressed)), Mean: p.Mean, Metrics: map[string]float64{
		"quiet-p50-ms": sidecartest.Millis(q.P50), "quiet-p99-ms": sidecartest.Millis(q.P99),
		"pressed-p50-ms": sidecartest.Millis(p.P50), "pressed-p99-ms": sidecartest.Millis(p.P99),
		"pressed-failed": float64(pressedFailed),
	}}
}

// idleAbuser keeps a connection to addr after one request (GET /healthz),
// sending nothing more, and opens another 10 ms after the server closes it,
// until ctx ends; connected counts the answered requests.
func idleAbuser(ctx context.Context, addr string, connected *atomic.Int64) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
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
// them, and reconnects at once when the server closes it, until ctx ends.
func slowlorisAbuser(ctx context.Context, addr string) {
	for ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", addr, 30*time.Second)
		if err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
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
