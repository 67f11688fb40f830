package elections_test

// How fast leadership fails over from one sidecar to a subscriber on another
// (issue 3). The benchmark runs a fixed experiment (200 failovers) once per
// -count round, whatever -benchtime says (see sidecartest.RunOnce);
// docs/BENCHMARKS.md explains the rows. What 10,000 subscribers of one
// election cost runs the sidecar as a process of its own and is
// cmd/coord-sidecar's BenchmarkElectionFanout10k.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// failoverChanges is the number of measured failovers of BenchmarkElectionFailover.
const failoverChanges = 200

// BenchmarkElectionFailover: two sidecars A and B on one ZooKeeper. 200 times, a
// candidate leading on A has its lease revoked on A while a candidate waits on B,
// and the time is taken from just before the revoke request is sent until a
// subscriber of the election's events on B receives the `leader` event naming
// B's candidate with a higher term. Between two measured changes, leadership is
// put back on A with a fresh pair of candidates (unmeasured), so every change
// starts from the same state: leader on A, one candidate waiting on B, and the
// subscriber on B up to date.
func BenchmarkElectionFailover(b *testing.B) { sidecartest.RunOnce(b, &ebFailoverLast, ebFailover) }

var ebFailoverLast *sidecartest.BenchResult

func ebFailover(b *testing.B) sidecartest.BenchResult {
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	carA := sidecartest.Start(b, zkc.Servers(), root)
	carB := sidecartest.Start(b, zkc.Servers(), root)
	const election = "failover"
	const within = 10 * time.Second

	sub := &ebFollower{st: carB.OpenStream(b, "/v1/elections/"+election+"/events")}
	leaderLease := sidecartest.Str(sidecartest.Campaign(b, carA, election, "a0", "ttl=60s").Body["lease"])
	term := sub.await(b, "a0", 0, 0, within)
	waitingLease := sidecartest.Str(sidecartest.Campaign(b, carB, election, "b0", "ttl=60s").Body["lease"])
	term = sub.await(b, "a0", term-1, 2, within)

	took := make([]time.Duration, 0, failoverChanges)
	for i := range failoverChanges {
		// Measured: revoke the leader's lease on A; B's subscriber sees b<i> lead.
		next := "b" + strconv.Itoa(i)
		ctx, cancel := context.WithTimeout(context.Background(), within)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, carA.Base+"/v1/leases/"+leaderLease, nil)
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		revoked := make(chan error, 1)
		start := time.Now()
		go func() {
			defer cancel()
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					err = fmt.Errorf("DELETE /v1/leases/%s: status %d", leaderLease, resp.StatusCode)
				}
			}
			revoked <- err
		}()
		newTerm := sub.await(b, next, term, 0, within)
		took = append(took, time.Since(start))
		if err := <-revoked; err != nil {
			b.Fatal(err)
		}
		term = newTerm

		// Unmeasured: a<i+1> enrols on A behind b<i>, b<i> goes, a<i+1> leads,
		// and b<i+1> waits on B.
		a := "a" + strconv.Itoa(i+1)
		leaderLease = sidecartest.Str(sidecartest.Campaign(b, carA, election, a, "ttl=60s").Body["lease"])
		carB.Must(b, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+waitingLease)
		term = sub.await(b, a, term, 0, within)
		waitingLease = sidecartest.Str(sidecartest.Campaign(b, carB, election, "b"+strconv.Itoa(i+1), "ttl=60s").Body["lease"])
		term = sub.await(b, a, term-1, 2, within)
	}
	carA.Must(b, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+leaderLease)
	carB.Must(b, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+waitingLease)

	q := sidecartest.Quantiles(took)
	b.Logf("failover over %d changes: min %s, p50 %s, p90 %s, p99 %s, max %s", len(took),
		q.Min, q.P50, q.At(0.90), q.P99, q.Max)
	return sidecartest.BenchResult{Samples: len(took), Mean: q.Mean, Metrics: map[string]float64{
		"p50-ms": sidecartest.Millis(q.P50),
		"p99-ms": sidecartest.Millis(q.P99),
		"max-ms": sidecartest.Millis(q.Max),
	}}
}

// ebFollower reads the `leader` events of one stream.
type ebFollower struct {
	st *sidecartest.Stream
}

// await reads events until candidate leads with a term above `above` (and, when
// candidates > 0, with that many candidates in line) and returns the term.
func (f *ebFollower) await(b testing.TB, candidate string, above int64, candidates int, within time.Duration) int64 {
	b.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := f.st.Next(b, time.Until(deadline))
		if ev.Name != "leader" {
			b.Fatalf("unexpected event %+v", ev)
		}
		leader, _ := ev.Data["leader"].(map[string]any)
		if leader == nil {
			continue
		}
		line, _ := ev.Data["candidates"].([]any)
		if term := sidecartest.Num(leader["term"]); sidecartest.Str(leader["candidate"]) == candidate && term > above &&
			(candidates == 0 || len(line) == candidates) {
			return term
		}
	}
}
