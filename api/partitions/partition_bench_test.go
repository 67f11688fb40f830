package partitions_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// BenchmarkPartitionReassign: 100 members (workers that ack as soon as they
// see a plan that takes something from them), 1,000 partitions, two sidecars.
// One op: one member's lease is revoked; its latency runs until the group's
// stream shows every survivor owning exactly its new plan. Reported: p50/p99/
// max and the plans the leader wrote per reassignment (each one ZooKeeper
// transaction). Between ops, untimed, a new member joins and the group settles.
func BenchmarkPartitionReassign(b *testing.B) {
	const members, partitions = 100, 1000
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	cars := []*sidecartest.Sidecar{sidecartest.Start(b, zkc.Servers(), root), sidecartest.Start(b, zkc.Servers(), root)}
	const g = "bench"
	cars[0].Send(b, http.StatusOK, http.MethodPut, "/v1/partitions/"+g, fmt.Sprintf(`{"count":%d}`, partitions))
	f := newFence()
	var ws []*pWorker
	next := 0
	join := func() {
		ws = append(ws, startWorkerWaiting(b, cars[next%2], g, fmt.Sprintf("m%04d", next), f, "30s"))
		next++
	}
	for range members {
		join()
	}
	settled := followSettled(b, cars[0], g)
	settled(members, time.Time{}, 60*time.Second)

	b.Run(fmt.Sprintf("members=%d,partitions=%d", members, partitions), func(b *testing.B) {
		var lats []time.Duration
		var plans float64
		for range b.N {
			b.StopTimer()
			before := planWrites(b, cars)
			// Revoke a member other than the leader (the earliest), on either sidecar.
			victim := ws[1]
			ws = slices.Delete(ws, 1, 2)
			b.StartTimer()
			start := time.Now()
			if r, err := victim.car.Do(context.Background(), http.MethodDelete, "/v1/leases/"+victim.lease, nil); err != nil || r.Status != http.StatusNoContent {
				b.Fatalf("revoke: %v %+v", err, r)
			}
			lats = append(lats, settled(members-1, start, 30*time.Second))
			b.StopTimer()
			plans += planWrites(b, cars) - before
			victim.halt()
			join()
			settled(members, time.Time{}, 30*time.Second)
			b.StartTimer()
		}
		b.StopTimer()
		slices.Sort(lats)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(lats[len(lats)/2]), "p50-ms")
		b.ReportMetric(ms(lats[(len(lats)*99+99)/100-1]), "p99-ms")
		b.ReportMetric(ms(lats[len(lats)-1]), "max-ms")
		b.ReportMetric(plans/float64(b.N), "plan-writes/op")
	})
	for _, w := range ws {
		w.halt()
	}
}

// followSettled follows the group's stream on car and returns a function that
// waits for a state with n members, all settled, and answers how long after
// start it arrived.
func followSettled(b *testing.B, car *sidecartest.Sidecar, group string) func(n int, start time.Time, within time.Duration) time.Duration {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, car.Base+"/v1/partitions/"+group+"/events", nil)
	resp, err := car.HC().Do(req)
	if err != nil {
		b.Fatal(err)
	}
	type seen struct {
		g  sidecartest.PGroup
		at time.Time
	}
	states := make(chan seen, 1024)
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			at := time.Now()
			var g sidecartest.PGroup
			if json.Unmarshal([]byte(line[6:]), &g) == nil {
				states <- seen{g, at}
			}
		}
	}()
	return func(n int, start time.Time, within time.Duration) time.Duration {
		deadline := time.After(within)
		for {
			select {
			case s := <-states:
				if s.g.Settled(n) {
					return s.at.Sub(start)
				}
			case <-deadline:
				b.Fatalf("group %s not settled with %d members within %s", group, n, within)
			}
		}
	}
}

// planWrites sums coord_partition_plans_total over the sidecars.
func planWrites(b *testing.B, cars []*sidecartest.Sidecar) float64 {
	var total float64
	for _, car := range cars {
		r := car.Must(b, http.StatusOK, http.MethodGet, "/metrics")
		for _, line := range strings.Split(string(r.Raw), "\n") {
			if v, ok := strings.CutPrefix(line, "coord_partition_plans_total "); ok {
				x, _ := strconv.ParseFloat(v, 64)
				total += x
			}
		}
	}
	return total
}
