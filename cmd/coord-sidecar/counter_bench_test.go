package main

// Benchmarks of counters and keys: counter adds per second through the sidecar
// against go-zookeeper's own Get+Set compare-and-set loop in the benchmark's
// process (the way a client without the sidecar adds to a DistributedAtomicLong),
// side by side on one server; and how fast a change of one key reaches 10,000
// subscribers of its event stream.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// cbRows are the rows of BenchmarkCounterAdds: clients adding at once, spread
// over counters.
var cbRows = []struct {
	name              string
	clients, counters int
}{
	{"c1", 1, 1},
	{"c16", 16, 1},
	{"c16-16counters", 16, 16},
}

// BenchmarkCounterAdds: b.N adds of 1, by `clients` goroutines each looping one
// add after another, client i on counter i % counters. sidecar: one add is
// `POST /v1/counters/{name}` (200 with the value after it; the sidecar combines
// the adds that arrive while a compare-and-set is under way). inprocess: one add
// is go-zookeeper's Get then Set at the version read, retried on ErrBadVersion,
// on the benchmark's own session (8 bytes big-endian, DistributedAtomicLong's
// layout). Each row checks that the counters end at exactly b.N. Metric adds/s.
func BenchmarkCounterAdds(b *testing.B) {
	env := sidecartest.NewBenchEnv(b)
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{env.Root, env.Root + "/inproc-counters"} {
		if _, err := env.Conn.Create(p, nil, 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			b.Fatal(err)
		}
	}
	for _, row := range cbRows {
		b.Run("sidecar/"+row.name, func(b *testing.B) {
			prefix := fmt.Sprintf("sc-%s-%d-", row.name, b.N)
			cbRun(b, row.clients, func(ctx context.Context, i int) error {
				return cbAdd(env, ctx, prefix+strconv.Itoa(i%row.counters))
			})
			cbCheck(env, b, row.counters, func(c int) int64 {
				r := env.Sc.Must(b, http.StatusOK, http.MethodGet, "/v1/counters/"+prefix+strconv.Itoa(c))
				return sidecartest.Num(r.Body["value"])
			})
		})
		b.Run("inprocess/"+row.name, func(b *testing.B) {
			prefix := fmt.Sprintf("%s/inproc-counters/%s-%d-", env.Root, row.name, b.N)
			cbRun(b, row.clients, func(_ context.Context, i int) error {
				return cbCASAdd(env.Conn, prefix+strconv.Itoa(i%row.counters), acl)
			})
			cbCheck(env, b, row.counters, func(c int) int64 {
				data, _, err := env.Conn.Get(prefix + strconv.Itoa(c))
				if errors.Is(err, zk.ErrNoNode) {
					return 0 // its client got no add to make
				}
				if err != nil || len(data) != 8 {
					b.Fatalf("counter %d: %x %v", c, data, err)
				}
				return int64(binary.BigEndian.Uint64(data))
			})
		})
	}
}

// cbRun runs b.N calls of add over clients goroutines (client i passes i) and
// reports adds/s.
func cbRun(b *testing.B, clients int, add func(ctx context.Context, client int) error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	b.ResetTimer()
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			for ctx.Err() == nil && next.Add(1) <= int64(b.N) {
				if err := add(ctx, i); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "adds/s")
}

// cbCheck fails b unless the counters' values add up to b.N.
func cbCheck(e *sidecartest.BenchEnv, b *testing.B, counters int, value func(c int) int64) {
	var sum int64
	for c := range counters {
		sum += value(c)
	}
	if sum != int64(b.N) {
		b.Fatalf("the counters add up to %d after %d adds", sum, b.N)
	}
}

// cbAdd adds 1 to a counter through the sidecar.
func cbAdd(e *sidecartest.BenchEnv, ctx context.Context, name string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Sc.Base+"/v1/counters/"+name, nil)
	if err != nil {
		return err
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("add to %s: status %d", name, resp.StatusCode)
	}
	return nil
}

// cbCASAdd adds 1 to the counter at p as a client of ZooKeeper does without
// the sidecar: Get, then Set at the version read, until a Set is not refused.
func cbCASAdd(conn *zk.Conn, p string, acl []zk.ACL) error {
	for {
		data, st, err := conn.Get(p)
		if errors.Is(err, zk.ErrNoNode) {
			_, err = conn.Create(p, binary.BigEndian.AppendUint64(nil, 1), 0, acl)
			if errors.Is(err, zk.ErrNodeExists) {
				continue
			}
			return err
		}
		if err != nil {
			return err
		}
		v := int64(binary.BigEndian.Uint64(data)) + 1
		_, err = conn.Set(p, binary.BigEndian.AppendUint64(nil, uint64(v)), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue
		}
		return err
	}
}

// BenchmarkKeyFanout10k: one sidecar, run as a process of its own (as
// BenchmarkElectionFanout10k's is), and 10,000 subscribers of one key's event
// stream, each a plain TCP connection with a hand-written HTTP/1.1 GET read by
// one goroutine of the benchmark's process. The key holds "c0"; then 20 times it
// is written ("c1", "c2", ...) and, per subscriber, the time is taken from just
// before the PUT is sent until that subscriber has read the `kv` event with the
// new value. It reports latency quantiles over all 200,000 (subscriber, change)
// pairs. KV_BENCH_SUBSCRIBERS=n runs it with n subscribers instead.
func BenchmarkKeyFanout10k(b *testing.B) { ebRunOnce(b, &kbFanoutLast, kbFanout) }

var kbFanoutLast *ebResult

func kbFanout(b *testing.B) ebResult {
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
	q := ebQuantiles(all)
	b.Logf("change to subscriber over %d pairs: min %s, p50 %s, p90 %s, p99 %s, max %s", len(all), q.min, q.p50, q.at(0.90), q.p99, q.max)
	return ebResult{samples: len(all), mean: q.mean, metrics: map[string]float64{
		"p50-ms": ebMillis(q.p50), "p99-ms": ebMillis(q.p99), "max-ms": ebMillis(q.max), "subscribers": float64(n),
	}}
}
