package queues_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// queueCall enqueues or takes through sidecartest.FaultClient, bounded by timeout; it returns
// the status, the body and the Item-Id header.
func queueCall(car *sidecartest.Sidecar, timeout time.Duration, method, path, body string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, car.Base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := sidecartest.FaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw), err
}

// Queue under faults: producers on three sidecars and takers on two, while the
// ZooKeeper leader is killed and one producing sidecar is killed with SIGKILL.
// Every enqueue that was acknowledged (201) is taken exactly once, or is still in
// the queue and taken when it is drained; no item is taken twice.
func TestQueueUnderFaults(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("starts a three-node ensemble")
	}
	zkc := zktest.StartEnsemble(t, 3)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root, "--session-timeout", "4s")
	b := sidecartest.Start(t, zkc.Servers(), root, "--session-timeout", "4s")
	addr := sidecartest.FreeAddr(t)
	proc := exec.Command(sidecartest.BuildBinary(t), "--listen", addr, "--zk", strings.Join(zkc.Servers(), ","), "--zk-root", root, "--session-timeout", "4s")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = proc.Wait() }()
	t.Cleanup(func() { _ = proc.Process.Kill() })
	p := &sidecartest.Sidecar{Base: "http://" + addr}
	p.WaitReady(t)

	const perProducer = 400
	q := &faultyQueue{acked: map[string]bool{}, taken: map[string]int{}}
	producers := []*sidecartest.Sidecar{a, b, p}
	var prodWG sync.WaitGroup
	for i, car := range producers {
		prodWG.Go(func() { q.produce(car, i, perProducer, car == p) })
	}
	stopTakers := make(chan struct{})
	var takeWG sync.WaitGroup
	for _, car := range []*sidecartest.Sidecar{a, b, a, b} {
		takeWG.Go(func() {
			for {
				select {
				case <-stopTakers:
					return
				default:
				}
				q.take(car)
			}
		})
	}

	testutil.Eventually(t, 2*time.Minute, "100 takes", func() bool { return q.tookAny.Load() >= 100 })
	leader := zkc.Leader()
	zkc.Kill(leader)
	t.Logf("killed ZooKeeper leader node %d after %d takes", leader, q.tookAny.Load())
	testutil.Eventually(t, 2*time.Minute, "the process sidecar is mid-run", func() bool { return q.procAcked.Load() >= perProducer/3 })
	q.procKill.Store(true)
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the producing sidecar process after it acknowledged %d items (the test waits for %d)", q.procAcked.Load(), perProducer/3)
	zkc.Restart(leader)
	prodWG.Wait()
	close(stopTakers)
	takeWG.Wait()
	// Drain what is left through one sidecar.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if !q.take(a) {
			status, body, err := queueCall(a, 10*time.Second, http.MethodGet, "/v1/queues/faulty", "")
			if err == nil && status == 200 && strings.Contains(body, `"length":0`) {
				break
			}
		}
	}
	q.check(t)
}

// faultyQueue is the record of TestQueueUnderFaults: what was acknowledged and
// what was taken, how often.
type faultyQueue struct {
	mu        sync.Mutex
	acked     map[string]bool
	taken     map[string]int
	tookAny   atomic.Int64
	procAcked atomic.Int64 // acknowledged by the sidecar process that is killed
	procKill  atomic.Bool  // set just before that process is killed
}

// produce enqueues items p<i>-<n> through car. isProc: car is the process that
// is killed; it goes on past items (up to 20 times as many) until its first
// failed call after the kill, since calls that fail fast while the ensemble
// elects a leader (each one moves on to the next item: a retried enqueue whose
// answer was lost could store its item twice) may use up items before it has
// acknowledged the third the test waits for.
func (q *faultyQueue) produce(car *sidecartest.Sidecar, i, items int, isProc bool) {
	if isProc {
		items *= 20
	}
	for n := range items {
		item := fmt.Sprintf("p%d-%04d", i, n)
		status, _, err := queueCall(car, 20*time.Second, http.MethodPost, "/v1/queues/faulty/items", item)
		if err == nil && status == http.StatusCreated {
			q.mu.Lock()
			q.acked[item] = true
			q.mu.Unlock()
			if isProc {
				q.procAcked.Add(1)
			}
		}
		if err != nil && isProc && q.procKill.Load() {
			return // the process was killed; until then an error (a call cut off
			// while the ensemble elects a leader) is retried with the next item
		}
	}
}

// take takes one item through car and reports whether it got one.
func (q *faultyQueue) take(car *sidecartest.Sidecar) bool {
	status, body, err := queueCall(car, 20*time.Second, http.MethodPost, "/v1/queues/faulty/take?wait=500ms", "")
	if err == nil && status == http.StatusOK {
		q.mu.Lock()
		q.taken[body]++
		q.mu.Unlock()
		q.tookAny.Add(1)
		return true
	}
	return false
}

// check fails t if an item was taken twice or an acknowledged one never.
func (q *faultyQueue) check(t *testing.T) {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	var missing, twice []string
	for item := range q.acked {
		if q.taken[item] == 0 {
			missing = append(missing, item)
		}
	}
	for item, n := range q.taken {
		if n > 1 {
			twice = append(twice, item)
		}
	}
	t.Logf("%d enqueues acknowledged, %d distinct items taken (%d not acknowledged: answers lost with the killed sidecar or the killed server)",
		len(q.acked), len(q.taken), len(q.taken)-len(q.acked))
	if len(twice) > 0 {
		t.Errorf("taken twice: %v", twice)
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged items never taken and not in the queue: %v", len(missing), missing[:min(10, len(missing))])
	}
}
