package queues_test

// Benchmarks of the sidecar's queue: take throughput by depth, and enqueue and
// take throughput against the queue of the ZooKeeper recipes page written
// directly on go-zookeeper (sequential children of one parent; take = list the
// children, pick the lowest, read and delete it), side by side on one server.
// docs/bench-queues.md records a run; `make bench` runs them.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
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

const (
	qbWorkers  = 16  // concurrent clients of every row
	qbItemSize = 128 // bytes per item
	qbFillers  = 64  // concurrent producers while setting a queue up (untimed)
)

var qbItem = bytes.Repeat([]byte("q"), qbItemSize)

// newQueueBenchEnv is sidecartest.NewBenchEnv with 10s sessions (a loaded machine must not
// expire them mid-run), and ZooKeeper warmed up by a few thousand untimed
// enqueues and takes through both paths, so that the first row does not pay for
// the server's JIT compilation.
func newQueueBenchEnv(b *testing.B) *sidecartest.BenchEnv {
	b.Helper()
	servers := zktest.Shared(b).Servers()
	root := zktest.Root(b)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConns = 128
	tr.MaxIdleConnsPerHost = 128
	b.Cleanup(tr.CloseIdleConnections)
	env := &sidecartest.BenchEnv{
		Sc:     sidecartest.Start(b, servers, root, "--session-timeout", "10s"),
		Client: &http.Client{Transport: tr},
		Conn:   zktest.Connect(b, servers, 10*time.Second),
		Root:   root,
	}
	qbFill(env, b, "warm-up", 5000)
	qbParallel(b, 5000, func(ctx context.Context) error { return qbTake(env, ctx, "warm-up") })
	warm := newDirectQueue(env, b, "warm-up")
	warm.fill(b, 3000)
	for range 300 {
		if _, err := warm.take(); err != nil {
			b.Fatal(err)
		}
	}
	return env
}

// BenchmarkQueueTakeDepth: takes from a queue 100 and 100,000 items deep. Each
// iteration takes one item and enqueues one, so the depth stays what it was; both
// rows do the same work but for the depth. The deep queue is filled once, by 64
// concurrent producers, before its row is timed.
func BenchmarkQueueTakeDepth(b *testing.B) {
	env := newQueueBenchEnv(b)
	// Warm the server up on this very mix of operations, untimed.
	qbFill(env, b, "warm-cycle", 100)
	qbParallel(b, 10000, func(ctx context.Context) error {
		if err := qbTake(env, ctx, "warm-cycle"); err != nil {
			return err
		}
		return qbEnqueue(env, ctx, "warm-cycle")
	})
	for _, depth := range []int{100, 100_000} {
		filled := false
		b.Run(fmt.Sprintf("depth=%d", depth), func(b *testing.B) {
			queue := fmt.Sprintf("depth-%d", depth)
			if !filled {
				start := time.Now()
				qbFill(env, b, queue, depth)
				filled = true
				b.Logf("filled %d items in %s", depth, time.Since(start).Round(time.Millisecond))
			}
			listings, conflicts := qbMetric(env, b, "coord_queue_bucket_listings_total"), qbMetric(env, b, "coord_queue_take_conflicts_total")
			sidecartest.RunWorkers(b, qbWorkers, "takes/s", func(ctx context.Context, _ int) error {
				if err := qbTake(env, ctx, queue); err != nil {
					return err
				}
				return qbEnqueue(env, ctx, queue)
			})
			b.ReportMetric((qbMetric(env, b, "coord_queue_bucket_listings_total")-listings)/float64(b.N), "listings/take")
			b.ReportMetric((qbMetric(env, b, "coord_queue_take_conflicts_total")-conflicts)/float64(b.N), "conflicts/take")
		})
	}
}

// BenchmarkQueueEnqueue: b.N enqueues of a 128-byte item by 16 clients, through
// the sidecar and with the recipe, each row into a queue of its own.
func BenchmarkQueueEnqueue(b *testing.B) {
	env := newQueueBenchEnv(b)
	run := 0
	b.Run("sidecar", func(b *testing.B) {
		run++
		queue := fmt.Sprintf("enq-%d", run)
		sidecartest.RunWorkers(b, qbWorkers, "items/s", func(ctx context.Context, _ int) error {
			return qbEnqueue(env, ctx, queue)
		})
	})
	b.Run("direct", func(b *testing.B) {
		run++
		q := newDirectQueue(env, b, fmt.Sprintf("enq-%d", run))
		sidecartest.RunWorkers(b, qbWorkers, "items/s", func(context.Context, int) error { return q.put(qbItem) })
	})
}

// BenchmarkQueueTake: 16 clients drain a queue filled with b.N items (filled
// untimed, by 64 concurrent producers), through the sidecar and with the recipe.
func BenchmarkQueueTake(b *testing.B) {
	env := newQueueBenchEnv(b)
	run := 0
	b.Run("sidecar", func(b *testing.B) {
		run++
		queue := fmt.Sprintf("take-%d", run)
		qbFill(env, b, queue, b.N)
		sidecartest.RunWorkers(b, qbWorkers, "items/s", func(ctx context.Context, _ int) error { return qbTake(env, ctx, queue) })
	})
	b.Run("direct", func(b *testing.B) {
		run++
		q := newDirectQueue(env, b, fmt.Sprintf("take-%d", run))
		q.fill(b, b.N)
		sidecartest.RunWorkers(b, qbWorkers, "items/s", func(context.Context, int) error {
			data, err := q.take()
			if err == nil && data == nil {
				err = errors.New("direct queue ran dry")
			}
			return err
		})
	})
}

// qbMetric reads one unlabelled metric of the sidecar.
func qbMetric(e *sidecartest.BenchEnv, b *testing.B, name string) float64 {
	b.Helper()
	resp, err := e.Client.Get(e.Sc.Base + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// qbFill enqueues n items through the sidecar with 64 concurrent producers.
func qbFill(e *sidecartest.BenchEnv, b *testing.B, queue string, n int) {
	b.Helper()
	qbParallel(b, n, func(ctx context.Context) error { return qbEnqueue(e, ctx, queue) })
}

// qbParallel runs op n times over qbFillers goroutines and fails b on an error.
func qbParallel(b *testing.B, n int, op func(ctx context.Context) error) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, qbFillers)
	for range qbFillers {
		wg.Go(func() {
			for ctx.Err() == nil && next.Add(1) <= int64(n) {
				if err := op(ctx); err != nil {
					errs <- err
					cancel()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// qbEnqueue posts one item (201).
func qbEnqueue(e *sidecartest.BenchEnv, ctx context.Context, queue string) error {
	return qbSend(e, ctx, "/v1/queues/"+queue+"/items", qbItem, http.StatusCreated)
}

// qbTake takes one item (200 with the item's bytes).
func qbTake(e *sidecartest.BenchEnv, ctx context.Context, queue string) error {
	return qbSend(e, ctx, "/v1/queues/"+queue+"/take", nil, http.StatusOK)
}

func qbSend(e *sidecartest.BenchEnv, ctx context.Context, path string, body []byte, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.Sc.Base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := e.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: status %d, want %d: %s", path, resp.StatusCode, want, raw)
	}
	if want == http.StatusOK && len(raw) != qbItemSize {
		return fmt.Errorf("POST %s: %d bytes, want %d", path, len(raw), qbItemSize)
	}
	return nil
}

// directQueue is the queue of the ZooKeeper recipes page on go-zookeeper:
// sequential children "qn-<seq>" of one persistent parent.
type directQueue struct {
	conn   *zk.Conn
	parent string
}

func newDirectQueue(e *sidecartest.BenchEnv, b *testing.B, name string) *directQueue {
	b.Helper()
	q := &directQueue{conn: e.Conn, parent: e.Root + "/direct/" + name}
	for _, p := range []string{e.Root, e.Root + "/direct", q.parent} {
		if _, err := e.Conn.Create(p, nil, zk.FlagPersistent, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			b.Fatal(err)
		}
	}
	return q
}

// put appends one item.
func (q *directQueue) put(data []byte) error {
	_, err := q.conn.Create(q.parent+"/qn-", data, zk.FlagSequence, zk.WorldACL(zk.PermAll))
	return err
}

func (q *directQueue) fill(b *testing.B, n int) {
	b.Helper()
	qbParallel(b, n, func(context.Context) error { return q.put(qbItem) })
}

// take lists the children, and reads and deletes the lowest it can; another
// taker's win (NoNode) moves it to the next child. nil when empty.
func (q *directQueue) take() ([]byte, error) {
	for {
		children, _, err := q.conn.Children(q.parent)
		if err != nil {
			return nil, err
		}
		if len(children) == 0 {
			return nil, nil
		}
		slices.Sort(children) // "qn-" + 10-digit sequence: text order is sequence order
		for _, c := range children {
			p := q.parent + "/" + c
			data, _, err := q.conn.Get(p)
			if errors.Is(err, zk.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if err := q.conn.Delete(p, -1); errors.Is(err, zk.ErrNoNode) {
				continue
			} else if err != nil {
				return nil, err
			}
			return data, nil
		}
	}
}
