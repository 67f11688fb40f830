package main

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

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// queueCall enqueues or takes through faultClient, bounded by timeout; it returns
// the status, the body and the Item-Id header.
func queueCall(car *sidecar, timeout time.Duration, method, path, body string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, car.base+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := faultClient.Do(req)
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
	if testing.Short() {
		t.Skip("starts a three-node ensemble")
	}
	zkc := zktest.StartEnsemble(t, 3)
	root := zktest.Root(t)
	a := startSidecar(t, zkc.Servers(), root, "--session-timeout", "4s")
	b := startSidecar(t, zkc.Servers(), root, "--session-timeout", "4s")
	addr := freeAddr(t)
	proc := exec.Command(buildBinary(t), "--listen", addr, "--zk", strings.Join(zkc.Servers(), ","), "--zk-root", root, "--session-timeout", "4s")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = proc.Wait() }()
	t.Cleanup(func() { _ = proc.Process.Kill() })
	p := &sidecar{base: "http://" + addr}
	p.waitReady(t)

	const perProducer = 400
	var (
		mu        sync.Mutex
		acked     = map[string]bool{}
		taken     = map[string]int{}
		tookAny   atomic.Int64
		procAcked atomic.Int64
	)
	producers := []*sidecar{a, b, p}
	var prodWG sync.WaitGroup
	for i, car := range producers {
		prodWG.Add(1)
		go func() {
			defer prodWG.Done()
			for n := range perProducer {
				item := fmt.Sprintf("p%d-%04d", i, n)
				status, _, err := queueCall(car, 20*time.Second, http.MethodPost, "/v1/queues/faulty/items", item)
				if err == nil && status == http.StatusCreated {
					mu.Lock()
					acked[item] = true
					mu.Unlock()
					if car == p {
						procAcked.Add(1)
					}
				}
				if err != nil && car == p {
					return // the process was killed
				}
			}
		}()
	}
	stopTakers := make(chan struct{})
	var takeWG sync.WaitGroup
	take := func(car *sidecar) bool {
		status, body, err := queueCall(car, 20*time.Second, http.MethodPost, "/v1/queues/faulty/take?wait=500ms", "")
		if err == nil && status == http.StatusOK {
			mu.Lock()
			taken[body]++
			mu.Unlock()
			tookAny.Add(1)
			return true
		}
		return false
	}
	for _, car := range []*sidecar{a, b, a, b} {
		takeWG.Add(1)
		go func() {
			defer takeWG.Done()
			for {
				select {
				case <-stopTakers:
					return
				default:
				}
				take(car)
			}
		}()
	}

	testutil.Eventually(t, 2*time.Minute, "100 takes", func() bool { return tookAny.Load() >= 100 })
	leader := zkc.Leader()
	zkc.Kill(leader)
	t.Logf("killed ZooKeeper leader node %d after %d takes", leader, tookAny.Load())
	testutil.Eventually(t, 2*time.Minute, "the process sidecar is mid-run", func() bool { return procAcked.Load() >= perProducer/3 })
	if err := proc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	t.Logf("killed the producing sidecar process after it acknowledged %d of its %d items", procAcked.Load(), perProducer)
	zkc.Restart(leader)
	prodWG.Wait()
	close(stopTakers)
	takeWG.Wait()
	// Drain what is left through one sidecar.
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if !take(a) {
			status, body, err := queueCall(a, 10*time.Second, http.MethodGet, "/v1/queues/faulty", "")
			if err == nil && status == 200 && strings.Contains(body, `"length":0`) {
				break
			}
		}
	}

	mu.Lock()
	defer mu.Unlock()
	var missing, twice []string
	for item := range acked {
		if taken[item] == 0 {
			missing = append(missing, item)
		}
	}
	for item, n := range taken {
		if n > 1 {
			twice = append(twice, item)
		}
	}
	t.Logf("%d enqueues acknowledged, %d distinct items taken (%d not acknowledged: answers lost with the killed sidecar or the killed server)",
		len(acked), len(taken), len(taken)-len(acked))
	if len(twice) > 0 {
		t.Errorf("taken twice: %v", twice)
	}
	if len(missing) > 0 {
		t.Errorf("%d acknowledged items never taken and not in the queue: %v", len(missing), missing[:min(10, len(missing))])
	}
}
