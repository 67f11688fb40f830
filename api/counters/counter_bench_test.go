package counters_test

// Benchmarks of counters: counter adds per second through the sidecar against
// go-zookeeper's own Get+Set compare-and-set loop in the benchmark's process
// (the way a client without the sidecar adds to a DistributedAtomicLong), side
// by side on one server. How fast a change of one key reaches 10,000
// subscribers is cmd/coord-sidecar's BenchmarkKeyFanout10k (the sidecar runs
// as a process of its own there).

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
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
