package services_test

// A service's pick at 1,000 instances: docs/BENCHMARKS.md, "Services"; `make
// bench` runs it.

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

const (
	pickInstances = 1000 // instances of the benchmark's service
	pickAlone     = 1000 // picks of the one client alone, per strategy
	pickClients   = 4    // concurrent clients of the second phase
	pickEach      = 1000 // picks of each of them, per strategy
	pickSeen      = 5    // removals and additions timed
)

// BenchmarkServicePick1000: one service of 1,000 instances, registered through
// one sidecar (the registrar, 16 registrations at once on one lease) and
// picked through another (the picker), both in the benchmark's process on the
// shared ZooKeeper server. Per strategy of the contract (random, round-robin,
// sticky), a sub-benchmark times GET /v1/services/{service}/pick over HTTP:
// 1,000 picks of one client alone (p50-µs, p99-µs), then 1,000 picks of each
// of 4 clients at once (picks/s, c4-p50-µs, c4-p99-µs); ns/op is the mean
// pick of the client alone, zk-req/1000-picks the ZooKeeper requests the
// picker's session sent meanwhile (ZooKeeper's own count, `cons`: a pick
// answers from the picker's follower of the service). Every pick must answer 200 with an instance, the
// client alone's round-robin must visit all 1,000 and its sticky must stay on
// one. The seen sub-benchmark times how long a change made through the
// registrar takes to show in the picker's picks, each pick back to back from
// just before the change's request is sent: an instance removed from the
// 1,000 (the one a sticky pick answers, until a sticky pick answers another:
// removed-p50-ms, removed-max-ms) and an instance registered in a service that
// had none (until a pick answers 200 rather than 404: added-p50-ms,
// added-max-ms), 5 of each; zk-req/removal is the ZooKeeper requests the
// picker's session sent per removal (ZooKeeper's own count, `cons`; a
// heartbeat included when one fell in the window).
func BenchmarkServicePick1000(b *testing.B) {
	env := sidecartest.NewBenchEnv(b)
	picker := env.Sc
	registrar := sidecartest.Start(b, zktest.Shared(b).Servers(), env.Root)
	lease := sidecartest.Str(registrar.Must(b, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=10m").Body["lease"])
	took := registerInstances(b, registrar, "bench", lease, pickInstances)
	b.Logf("%d instances registered in %v", pickInstances, took.Round(time.Millisecond))
	// The picker's first pick opens its follower; wait until it shows all.
	deadline := time.Now().Add(testutil.Patience(time.Minute))
	for {
		r := picker.Must(b, http.StatusOK, http.MethodGet, "/v1/services/bench")
		if l, _ := r.Body["instances"].([]any); len(l) == pickInstances {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the picker does not show %d instances", pickInstances)
		}
		time.Sleep(50 * time.Millisecond) // polling a state, not ordering
	}
	// The first pick opens the picker's follower of the service, reading every
	// instance: a cost of no row.
	picker.Must(b, http.StatusOK, http.MethodGet, "/v1/services/bench/pick")
	for _, strategy := range []string{"random", "round-robin", "sticky"} {
		var last *sidecartest.BenchResult
		b.Run(strategy, func(b *testing.B) {
			sidecartest.RunOnce(b, &last, func(b *testing.B) sidecartest.BenchResult {
				return pickRows(b, env.Client, picker, strategy)
			})
		})
	}
	var seen *sidecartest.BenchResult
	b.Run("seen", func(b *testing.B) {
		sidecartest.RunOnce(b, &seen, func(b *testing.B) sidecartest.BenchResult {
			return pickSeenRows(b, env.Client, picker, registrar, lease)
		})
	})
}

// registerInstances registers n instances i-00000... of service under lease
// through car, 16 at a time, and returns how long it took.
func registerInstances(b *testing.B, car *sidecartest.Sidecar, service, lease string, n int) time.Duration {
	b.Helper()
	start := time.Now()
	err := sidecartest.InParallel(0, n, 16, func(i int) error {
		return register(car, service, fmt.Sprintf("i-%05d", i), lease, i)
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func register(car *sidecartest.Sidecar, service, id, lease string, i int) error {
	body := fmt.Sprintf(`{"address":"10.0.%d.%d","port":8080}`, i/250, i%250+1)
	r, err := car.Do(context.Background(), http.MethodPut, "/v1/services/"+service+"/instances/"+id+"?lease="+lease,
		strings.NewReader(body), "Content-Type", "application/json")
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	if r.Status != http.StatusCreated {
		return fmt.Errorf("register %s: %d %v", id, r.Status, r.Body)
	}
	return nil
}

// pickOnce sends one pick and answers the instance's id and the status.
func pickOnce(ctx context.Context, hc *http.Client, url string) (string, int, error) {
	r, err := sidecartest.DoWith(ctx, hc, url, http.MethodGet, "", nil)
	if err != nil {
		return "", 0, err
	}
	return sidecartest.Str(r.Body["id"]), r.Status, nil
}

// pickRows is one strategy's rows: the client alone, then pickClients at once.
func pickRows(b *testing.B, hc *http.Client, picker *sidecartest.Sidecar, strategy string) sidecartest.BenchResult {
	ctx := context.Background()
	url := picker.Base + "/v1/services/bench/pick?strategy=" + strategy
	server := zktest.Shared(b).Server(0)
	sid := sidecartest.Str(picker.Must(b, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	before := zktest.Received(b, server, sid)
	alone := make([]time.Duration, 0, pickAlone)
	ids := map[string]int{}
	for range pickAlone {
		t0 := time.Now()
		id, status, err := pickOnce(ctx, hc, url)
		alone = append(alone, time.Since(t0))
		if err != nil || status != http.StatusOK || id == "" {
			b.Fatalf("pick: %d %q %v", status, id, err)
		}
		ids[id]++
	}
	switch {
	case strategy == "round-robin" && len(ids) != pickInstances:
		b.Fatalf("round-robin visited %d of %d instances in %d picks", len(ids), pickInstances, pickAlone)
	case strategy == "sticky" && len(ids) != 1:
		b.Fatalf("sticky answered %d instances", len(ids))
	}
	requests := zktest.Received(b, server, sid) - before
	lat := make([][]time.Duration, pickClients)
	errs := make(chan error, pickClients)
	var wg sync.WaitGroup
	start := time.Now()
	for c := range pickClients {
		wg.Go(func() {
			for range pickEach {
				t0 := time.Now()
				id, status, err := pickOnce(ctx, hc, url)
				lat[c] = append(lat[c], time.Since(t0))
				if err != nil || status != http.StatusOK || id == "" {
					errs <- fmt.Errorf("pick: %d %q %v", status, id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	q1, q4 := sidecartest.Quantiles(alone), sidecartest.Quantiles(all)
	rate := float64(len(all)) / elapsed.Seconds()
	b.Logf("%s at %d instances: alone p50 %v p99 %v (%d ZooKeeper requests of the picker's session in %d picks); %d clients: %.0f picks/s, p50 %v p99 %v",
		strategy, pickInstances, q1.P50, q1.P99, requests, pickAlone, pickClients, rate, q4.P50, q4.P99)
	micros := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	return sidecartest.BenchResult{Samples: len(alone), Mean: q1.Mean, Metrics: map[string]float64{
		"p50-µs": micros(q1.P50), "p99-µs": micros(q1.P99),
		"picks/s": rate, "c4-p50-µs": micros(q4.P50), "c4-p99-µs": micros(q4.P99),
		"zk-req/1000-picks": float64(requests) * 1000 / pickAlone,
	}}
}

// pickSeenRows times removals from the 1,000 and additions to an empty
// service, each as the picker's picks show it.
func pickSeenRows(b *testing.B, hc *http.Client, picker, registrar *sidecartest.Sidecar, lease string) sidecartest.BenchResult {
	ctx := context.Background()
	within := testutil.Patience(30 * time.Second)
	// until picks back to back until done(id, status), failing b past within.
	until := func(url string, done func(string, int) bool) {
		deadline := time.Now().Add(within)
		for {
			id, status, err := pickOnce(ctx, hc, url)
			if err != nil {
				b.Fatal(err)
			}
			if done(id, status) {
				return
			}
			if time.Now().After(deadline) {
				b.Fatalf("%s: still %d %q after %v", url, status, id, within)
			}
		}
	}
	sticky := picker.Base + "/v1/services/bench/pick?strategy=sticky"
	server := zktest.Shared(b).Server(0)
	sid := sidecartest.Str(picker.Must(b, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	before := zktest.Received(b, server, sid)
	var removed, added []time.Duration
	for range pickSeen {
		x, _, err := pickOnce(ctx, hc, sticky)
		if err != nil || x == "" {
			b.Fatalf("sticky pick: %q %v", x, err)
		}
		removed = append(removed, sidecartest.Timed(func() {
			registrar.Must(b, http.StatusNoContent, http.MethodDelete, "/v1/services/bench/instances/"+x+"?lease="+lease)
		}, func() {
			until(sticky, func(id string, status int) bool { return status == http.StatusOK && id != x })
		}))
	}
	requests := float64(zktest.Received(b, server, sid)-before) / pickSeen
	fresh := picker.Base + "/v1/services/bench-fresh/pick"
	until(fresh, func(_ string, status int) bool { return status == http.StatusNotFound })
	for k := range pickSeen {
		id := fmt.Sprintf("fresh-%d", k)
		added = append(added, sidecartest.Timed(func() {
			if err := register(registrar, "bench-fresh", id, lease, k); err != nil {
				b.Fatal(err)
			}
		}, func() {
			until(fresh, func(got string, status int) bool { return status == http.StatusOK && got == id })
		}))
		registrar.Must(b, http.StatusNoContent, http.MethodDelete, "/v1/services/bench-fresh/instances/"+id+"?lease="+lease)
		until(fresh, func(_ string, status int) bool { return status == http.StatusNotFound })
	}
	qr, qa := sidecartest.Quantiles(removed), sidecartest.Quantiles(added)
	b.Logf("seen by the picker's picks: removed from %d p50 %v max %v (%.1f ZooKeeper requests of the picker's session a removal); added to none p50 %v max %v",
		pickInstances, qr.P50, qr.Max, requests, qa.P50, qa.Max)
	return sidecartest.BenchResult{Samples: len(removed), Mean: qr.Mean, Metrics: map[string]float64{
		"removed-p50-ms": sidecartest.Millis(qr.P50), "removed-max-ms": sidecartest.Millis(qr.Max),
		"added-p50-ms": sidecartest.Millis(qa.P50), "added-max-ms": sidecartest.Millis(qa.Max),
		"zk-req/removal": requests,
	}}
}
