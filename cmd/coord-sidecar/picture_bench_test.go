package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// BenchmarkPicture10k is the whole picture at 10,000 things (6,000 held locks,
// 2,000 elections with a candidate, 1,000 queues with an item, 1,000 raised
// barriers), made straight in ZooKeeper, with the sidecar in a process of its
// own. It reports the time to the complete first state of GET /v1/events for
// the first follower (first-state-ms) and for the tenth (tenth-first-state-ms),
// the sidecar's VmRSS with 10 followers (rss-MiB), ZooKeeper requests per second
// on the sidecar's connection while nothing changes with no follower (the
// session's heartbeat: idle-zk-req/s-none) and with 10 (idle-zk-req/s), and how
// long a lock taken through the API takes to show on a follower (change-ms, the
// ns/op row's sample). docs/BENCHMARKS.md, "The whole picture".
func BenchmarkPicture10k(b *testing.B) { sidecartest.RunOnce(b, &pictureLast, picture10k) }

var pictureLast *sidecartest.BenchResult

func picture10k(b *testing.B) sidecartest.BenchResult {
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	conn := zktest.Connect(b, zkc.Servers(), 30*time.Second)
	n := sidecartest.Things{Locks: 6000, Elections: 2000, Queues: 1000, Barriers: 1000}
	made := sidecartest.MakeThings(b, conn, root, n)
	car, pid := ebStartProcess(b, zkc.Servers(), root)
	sid := sidecartest.Str(car.Must(b, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	idle := func() float64 {
		const window = 5 * time.Second
		before := zktest.Received(b, zkc.Server(0), sid)
		time.Sleep(window) // a measuring window, not ordering
		return float64(zktest.Received(b, zkc.Server(0), sid)-before) / window.Seconds()
	}
	none := idle()

	first := car.OpenStream(b, "/v1/events")
	took := sidecartest.FirstState(b, first, n.Total(), 5*time.Minute)
	var tenth time.Duration
	for range 9 {
		tenth = sidecartest.FirstState(b, car.OpenStream(b, "/v1/events"), n.Total(), 5*time.Minute)
	}
	rss := ebRSS(b, pid)
	ten := idle()
	var changes []time.Duration
	for i := range 5 {
		lock := sidecartest.ThingName("bench-fresh", i)
		changes = append(changes, sidecartest.Timed(func() {
			car.Must(b, http.StatusCreated, http.MethodPost, "/v1/locks/"+lock+"?ttl=60s")
		}, func() {
			sidecartest.AwaitEvent(b, first, 10*time.Second, "lock "+lock+" shown", func(ev sidecartest.Event) bool {
				return ev.Name == "lock" && ev.Data["name"] == lock && ev.Data["holder"] != nil
			})
		}))
	}
	q := sidecartest.Quantiles(changes)
	b.Logf("%d things made in %v; first state %v (tenth follower %v); VmRSS %d MiB with 10 followers; idle ZooKeeper requests/s %.1f with no follower, %.1f with 10; change shown p50 %v max %v",
		n.Total(), made, took, tenth, rss>>20, none, ten, q.P50, q.Max)
	return sidecartest.BenchResult{Samples: len(changes), Mean: q.Mean, Metrics: map[string]float64{
		"first-state-ms":       sidecartest.Millis(took),
		"tenth-first-state-ms": sidecartest.Millis(tenth),
		"rss-MiB":              float64(rss) / (1 << 20),
		"idle-zk-req/s-none":   none,
		"idle-zk-req/s":        ten,
		"change-ms":            sidecartest.Millis(q.P50),
	}}
}
