package throughput_test

// Benchmark of throughput-group rebalancing: how long from a member joining (or
// its lease being revoked) until every member's SSE stream shows the new
// allocation. docs/bench-throughput.md records results; `make bench` runs it.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// benchMembers is the group's size; they are spread over two sidecars.
const benchMembers = 100

// tpSeen is one allocation as one stream received it.
type tpSeen struct {
	hasX bool // the churning member is in it
	at   time.Time
}

// BenchmarkThroughputRebalance: 100 members on 2 sidecars, each following the
// group's stream on its own sidecar. Each op alternately joins member "x" (on
// the sidecar that does not lead) or revokes its lease, and waits until all 100
// streams show an allocation with (or without) x and shares summing to the
// limit. It reports the median and p99 of that time (p50-ms, p99-ms).
func BenchmarkThroughputRebalance(b *testing.B) {
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	cars := []*sidecartest.Sidecar{sidecartest.Start(b, zkc.Servers(), root), sidecartest.Start(b, zkc.Servers(), root)}
	const g = "bench"
	ctx := context.Background()
	if r, err := cars[0].Do(ctx, http.MethodPut, "/v1/throughput/"+g, strings.NewReader(`{"limit":100000}`), "Content-Type", "application/json"); err != nil || r.Status != http.StatusOK {
		b.Fatalf("set limit: %v %+v", err, r)
	}
	streams := make([]chan tpSeen, benchMembers)
	for i := range benchMembers {
		car := cars[i%2]
		lease := benchLease(b, car)
		if r, err := car.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/throughput/%s/members?id=m%03d&lease=%s", g, i, lease), nil); err != nil || r.Status != http.StatusCreated {
			b.Fatalf("join m%03d: %v %+v", i, err, r)
		}
		streams[i] = benchFollow(b, car, g, i < 2)
	}
	for _, s := range streams { // every stream has caught up with the whole group
		awaitX(b, s, false, time.Time{})
	}

	b.Run(fmt.Sprintf("members=%d", benchMembers), func(b *testing.B) {
		var lats []time.Duration
		var lease string
		x := cars[1] // m000, the leader, is on cars[0]
		for i := range b.N {
			joining := i%2 == 0
			if joining {
				b.StopTimer()
				lease = benchLease(b, x)
				b.StartTimer()
			}
			start := time.Now()
			var r *sidecartest.Response
			var err error
			if joining {
				r, err = x.Do(ctx, http.MethodPost, "/v1/throughput/"+g+"/members?id=x&lease="+lease, nil)
			} else {
				r, err = x.Do(ctx, http.MethodDelete, "/v1/leases/"+lease, nil)
			}
			if err != nil || (r.Status != http.StatusCreated && r.Status != http.StatusNoContent) {
				b.Fatalf("op %d: %v %+v", i, err, r)
			}
			var last time.Duration
			for _, s := range streams {
				last = max(last, awaitX(b, s, joining, start))
			}
			lats = append(lats, last)
		}
		b.StopTimer()
		if b.N%2 == 1 { // the last op joined x: leave it out for the next round
			_, _ = x.Do(ctx, http.MethodDelete, "/v1/leases/"+lease, nil)
			for _, s := range streams {
				awaitX(b, s, false, time.Time{})
			}
		}
		slices.Sort(lats)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(lats[len(lats)/2]), "p50-ms")
		b.ReportMetric(ms(lats[(len(lats)*99+99)/100-1]), "p99-ms")
		b.ReportMetric(ms(lats[len(lats)-1]), "max-ms")
	})
}

func benchLease(b *testing.B, car *sidecartest.Sidecar) string {
	r, err := car.Do(context.Background(), http.MethodPost, "/v1/leases?ttl=10m", nil)
	if err != nil || r.Status != http.StatusCreated {
		b.Fatalf("lease: %v %+v", err, r)
	}
	return sidecartest.Str(r.Body["lease"])
}

// awaitX reads a stream until an allocation with (or without) x arrives and
// returns how long after start it was received.
func awaitX(b *testing.B, s chan tpSeen, hasX bool, start time.Time) time.Duration {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-s:
			if !ok {
				b.Fatal("stream ended")
			}
			if ev.hasX == hasX {
				return ev.at.Sub(start)
			}
		case <-timeout:
			b.Fatalf("no allocation with x=%v within 30s", hasX)
		}
	}
}

// benchFollow opens the group's stream and reports each allocation with the
// time it was received. With check, it decodes every allocation and ends the
// stream on one whose shares do not sum to the limit (the others only look for
// x, so that 100 clients decoding JSON do not crowd out the sidecars). The
// channel closes when the stream ends.
func benchFollow(b *testing.B, car *sidecartest.Sidecar, group string, check bool) chan tpSeen {
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, car.Base+"/v1/throughput/"+group+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		b.Fatalf("stream: %v %v", err, resp)
	}
	out := make(chan tpSeen, 4096)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event:"):
				event = strings.TrimSpace(line[6:])
			case strings.HasPrefix(line, "data:") && event == "throughput":
				at := time.Now()
				if !check {
					out <- tpSeen{at: at, hasX: strings.Contains(line, `"id":"x"`)}
					continue
				}
				var g struct {
					Limit   int64 `json:"limit"`
					Members []struct {
						ID    string `json:"id"`
						Share int64  `json:"share"`
					} `json:"members"`
				}
				if json.Unmarshal([]byte(line[5:]), &g) != nil {
					return
				}
				seen := tpSeen{at: at}
				var sum int64
				for _, m := range g.Members {
					sum += m.Share
					seen.hasX = seen.hasX || m.ID == "x"
				}
				if len(g.Members) > 0 && sum != g.Limit {
					return // a torn allocation ends the stream: the benchmark fails
				}
				out <- seen
			}
		}
	}()
	return out
}
