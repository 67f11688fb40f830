package main

// How fast a change of one key reaches 10,000 subscribers of its event stream,
// with the sidecar run as a process of its own (the built command). Counter adds
// per second are api/counters' BenchmarkCounterAdds.

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// BenchmarkKeyFanout10k: one sidecar, run as a process of its own (as
// BenchmarkElectionFanout10k's is), and 10,000 subscribers of one key's event
// stream, each a plain TCP connection with a hand-written HTTP/1.1 GET read by
// one goroutine of the benchmark's process. The key holds "c0"; then 20 times it
// is written ("c1", "c2", ...) and, per subscriber, the time is taken from just
// before the PUT is sent until that subscriber has read the `kv` event with the
// new value. It reports latency quantiles over all 200,000 (subscriber, change)
// pairs. KV_BENCH_SUBSCRIBERS=n runs it with n subscribers instead.
func BenchmarkKeyFanout10k(b *testing.B) { sidecartest.RunOnce(b, &kbFanoutLast, kbFanout) }

var kbFanoutLast *sidecartest.BenchResult

func kbFanout(b *testing.B) sidecartest.BenchResult {
	n := fanoutSubscribers
	if v, err := strconv.Atoi(os.Getenv("KV_BENCH_SUBSCRIBERS")); err == nil && v > 0 {
		n = v
	}
	ebRaiseOpenFiles(b, uint64(n+1024))
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	car, _ := ebStartProcess(b, zkc.Servers(), root)
	put := func(v string) {
		r, err := car.Do(context.Background(), http.MethodPut, "/v1/kv/fanout", strings.NewReader(v), "Content-Type", "text/plain")
		if err != nil || r.Status != http.StatusOK {
			b.Fatalf("put %s: %v %+v", v, err, r)
		}
	}
	put("c0")
	fan := newEBFanout(n, fanoutChanges)
	fan.mark = []byte(`"value":"c`)
	b.Cleanup(fan.close)
	if err := fan.connect(strings.TrimPrefix(car.Base, "http://"), "/v1/kv/fanout/events"); err != nil {
		b.Fatal(err)
	}
	if err := fan.wait(&fan.ready, 60*time.Second); err != nil {
		b.Fatalf("initial state: %v", err)
	}
	b.Logf("%d subscribers connected and served their first event in %s", n, time.Since(fan.t0).Round(time.Millisecond))
	for k := range fanoutChanges {
		fan.start[k] = int64(time.Since(fan.t0))
		put("c" + strconv.Itoa(k+1))
		if err := fan.wait(&fan.got[k], 30*time.Second); err != nil {
			b.Fatalf("change %d: %v", k, err)
		}
		time.Sleep(100 * time.Millisecond) // the next change starts from quiet
	}
	if err := fan.failed(); err != nil {
		b.Fatal(err)
	}
	fan.close()
	all := make([]time.Duration, 0, n*fanoutChanges)
	for k := range fanoutChanges {
		for s := range n {
			all = append(all, time.Duration(fan.recv[k*n+s]-fan.start[k]))
		}
	}
	q := sidecartest.Quantiles(all)
	b.Logf("change to subscriber over %d pairs: min %s, p50 %s, p90 %s, p99 %s, max %s", len(all), q.Min, q.P50, q.At(0.90), q.P99, q.Max)
	return sidecartest.BenchResult{Samples: len(all), Mean: q.Mean, Metrics: map[string]float64{
		"p50-ms": sidecartest.Millis(q.P50), "p99-ms": sidecartest.Millis(q.P99), "max-ms": sidecartest.Millis(q.Max), "subscribers": float64(n),
	}}
}
