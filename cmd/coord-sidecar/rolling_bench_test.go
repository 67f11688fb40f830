package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/benchload"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// rollBenchRows are the lock rows of make bench's coord-bench (c1, c16, c64:
// workers each on a lock of its own; hot: 16 workers on one lock).
var rollBenchRows = []struct {
	name    string
	workers int
	hot     bool
}{
	{"c1", 1, false},
	{"c16", 16, false},
	{"c64", 64, false},
	{"hot", 16, true},
}

// BenchmarkRollingRestart measures what a rolling restart of the ZooKeeper
// ensemble costs the lock rows (issue 36; docs/BENCHMARKS.md, "ZooKeeper
// rolling restart"): a sidecar process (the built binary, session timeout
// 10s) on a 3-node ensemble of its own, the row's workers cycling
// acquire+release (POST ?wait=30s with an implicit lease, then DELETE
// ?lease=, one kept-alive connection each; a hot row's holders checked: one
// at a time, fencing tokens rising). After a second's warm-up, 5s measured on
// the quiet ensemble; then the roll: each server in turn, the followers first
// and the leader last, stopped with SIGTERM, down 3s, started again and
// waited for until the leader counts it synced, then 1s more. Reported:
// cycles/s quiet and over the roll and their ratio; the wait of every request
// that was under way while a server was away (from its stop until it was
// synced again), median, p99 and max (and the max over the followers'
// restarts and over the leader's); failed (a request answered other than 201
// or 204, or not at all; target 0); and the quiet requests' median. A failed
// acquire is tried again after 10 ms, a failed release until the sidecar
// answers it.
func BenchmarkRollingRestart(b *testing.B) {
	zkc := zktest.StartEnsemble(b, 3)
	zkc.AwaitSynced(testutil.Patience(time.Minute))
	root := zktest.Root(b)
	r := &restartable{bin: sidecartest.BuildBinary(b), addr: sidecartest.FreeAddr(b), logFile: filepath.Join(b.TempDir(), "log")}
	r.args = []string{"--listen", r.addr, "--zk", strings.Join(zkc.Servers(), ","), "--zk-root", root, "--session-timeout", "10s"}
	car := r.start(b)
	for _, row := range rollBenchRows {
		b.Run(row.name, func(b *testing.B) {
			last := (*sidecartest.BenchResult)(nil)
			sidecartest.RunOnce(b, &last, func(b *testing.B) sidecartest.BenchResult {
				return rollBenchRound(b, zkc, car, row.name, row.workers, row.hot)
			})
		})
	}
}

// rollReq is one request of the load: when it started, how long it took, and
// whether it was answered as wanted.
type rollReq struct {
	start time.Time
	took  time.Duration
	ok    bool
}

// rollBenchLoad is the workers of one row and what they saw.
type rollBenchLoad struct {
	base   string
	client *http.Client
	cycles atomic.Int64
	failed atomic.Int64

	mu        sync.Mutex
	reqs      []rollReq
	firstFail []string
	exclusion error
}

// send makes one request and records it; true when answered with want (the
// answer, then, decoded into out when not nil).
func (l *rollBenchLoad) send(ctx context.Context, method, path string, want int, out any) bool {
	start := time.Now()
	err := benchload.Send(ctx, l.client, method, l.base+path, nil, want, out)
	took := time.Since(start)
	if ctx.Err() != nil {
		return false // the load stopping: neither counted nor failed
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, rollReq{start: start, took: took, ok: err == nil})
	if err != nil {
		l.failed.Add(1)
		if len(l.firstFail) < 5 {
			l.firstFail = append(l.firstFail, err.Error())
		}
	}
	return err == nil
}

// worker cycles on lock until ctx ends.
func (l *rollBenchLoad) worker(ctx context.Context, lock string, x *benchload.Exclusion) {
	for ctx.Err() == nil {
		var grant struct {
			Lease        string `json:"lease"`
			FencingToken int64  `json:"fencingToken"`
		}
		if !l.send(ctx, http.MethodPost, "/v1/locks/"+lock+"?wait=30s", http.StatusCreated, &grant) {
			pauseCtx(ctx, 10*time.Millisecond)
			continue
		}
		if err := x.Enter(grant.FencingToken); err != nil {
			l.mu.Lock()
			if l.exclusion == nil {
				l.exclusion = err
			}
			l.mu.Unlock()
		}
		x.Leave()
		release := "/v1/locks/" + lock + "?lease=" + url.QueryEscape(grant.Lease)
		if !l.send(ctx, http.MethodDelete, release, http.StatusNoContent, nil) {
			l.releaseAgain(ctx, release)
		}
		l.cycles.Add(1)
	}
}

// releaseAgain repeats a release the sidecar failed until it answers 204, or
// 404 (the first one was done after all), or ctx ends, so that the lock is not
// left held for the next round (a hot row's other workers). These repeats are
// not counted: the first try was, as failed.
func (l *rollBenchLoad) releaseAgain(ctx context.Context, release string) {
	for ctx.Err() == nil {
		pauseCtx(ctx, 10*time.Millisecond)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, l.base+release, nil)
		if err != nil {
			return
		}
		resp, err := l.client.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotFound {
			return
		}
	}
}

// pauseCtx sleeps d or until ctx ends.
func pauseCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// rollWindow is a span in which a server was away: from its stop until the
// leader counted it synced again.
type rollWindow struct{ from, to time.Time }

// waitsIn is the waits of the requests under way at some time within one of
// the windows, and how many of them failed.
func (l *rollBenchLoad) waitsIn(windows []rollWindow) (waits []time.Duration, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, q := range l.reqs {
		for _, w := range windows {
			if q.start.Before(w.to) && q.start.Add(q.took).After(w.from) {
				waits = append(waits, q.took)
				if !q.ok {
					failed++
				}
				break
			}
		}
	}
	return waits, failed
}

// rollBenchRound runs one row: warm-up, quiet, roll.
func rollBenchRound(b *testing.B, zkc *zktest.Cluster, car *sidecartest.Sidecar, name string, workers int, hot bool) sidecartest.BenchResult {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256}
	defer tr.CloseIdleConnections()
	l := &rollBenchLoad{base: car.Base, client: &http.Client{Transport: tr}}
	var x *benchload.Exclusion
	if hot {
		x = &benchload.Exclusion{}
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for w := range workers {
		lock := fmt.Sprintf("roll-%s-%d", name, w)
		if hot {
			lock = "roll-hot"
		}
		wg.Go(func() { l.worker(ctx, lock, x) })
	}
	time.Sleep(time.Second) // warm-up
	quietFrom, n0 := time.Now(), l.cycles.Load()
	time.Sleep(5 * time.Second)
	quiet := float64(l.cycles.Load()-n0) / time.Since(quietFrom).Seconds()
	quietWaits, _ := l.waitsIn([]rollWindow{{quietFrom, time.Now()}})

	rollFrom, n1 := time.Now(), l.cycles.Load()
	windows := rollEnsemble(b, zkc)
	during := float64(l.cycles.Load()-n1) / time.Since(rollFrom).Seconds()
	stop()
	wg.Wait()

	if l.exclusion != nil {
		b.Fatalf("the hot lock's holders: %v", l.exclusion)
	}
	waits, failed := l.waitsIn(windows)
	followers, _ := l.waitsIn(windows[:2])
	leaderWaits, _ := l.waitsIn(windows[2:])
	q, qq := sidecartest.Quantiles(waits), sidecartest.Quantiles(quietWaits)
	qf, ql := sidecartest.Quantiles(followers), sidecartest.Quantiles(leaderWaits)
	b.Logf("%s: cycles/s %.0f quiet, %.0f during the roll (%.2f); %d requests under way while a server was away: wait median %s, p99 %s, max %s (followers' restarts %s, the leader's %s), %d failed; quiet median %s; first failures %q",
		name, quiet, during, during/quiet, len(waits), q.P50.Round(time.Microsecond), q.P99.Round(time.Millisecond), q.Max.Round(time.Millisecond),
		qf.Max.Round(time.Millisecond), ql.Max.Round(time.Millisecond), failed, qq.P50.Round(time.Microsecond), l.firstFail)
	return sidecartest.BenchResult{Samples: max(len(waits), 1), Mean: q.Mean, Metrics: map[string]float64{
		"cycles/s-quiet":       quiet,
		"cycles/s-roll":        during,
		"roll/quiet":           during / quiet,
		"wait-ms-p50":          sidecartest.Millis(q.P50),
		"wait-ms-p99":          sidecartest.Millis(q.P99),
		"wait-ms-max":          sidecartest.Millis(q.Max),
		"wait-ms-max-follower": sidecartest.Millis(qf.Max),
		"wait-ms-max-leader":   sidecartest.Millis(ql.Max),
		"quiet-ms-p50":         sidecartest.Millis(qq.P50),
		"failed":               float64(l.failed.Load()),
	}}
}

// rollEnsemble restarts every server of zkc in turn, the followers first and
// the leader last: SIGTERM, 3s down, started again, waited for until synced,
// then 1s more. It returns the spans in which each server was away.
func rollEnsemble(b *testing.B, zkc *zktest.Cluster) []rollWindow {
	b.Helper()
	leader := zkc.Leader()
	if leader < 0 {
		b.Fatal("no ZooKeeper leader before the roll")
	}
	order := slices.DeleteFunc([]int{0, 1, 2}, func(i int) bool { return i == leader })
	var windows []rollWindow
	for _, i := range append(order, leader) {
		from := time.Now()
		zkc.Stop(i)
		time.Sleep(3 * time.Second)
		zkc.Restart(i)
		zkc.AwaitSynced(testutil.Patience(time.Minute))
		windows = append(windows, rollWindow{from, time.Now()})
		time.Sleep(time.Second)
	}
	return windows
}
