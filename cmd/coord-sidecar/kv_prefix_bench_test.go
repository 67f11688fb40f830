package main

// The keys' prefix stream and subtree list at 10,000 keys: docs/BENCHMARKS.md,
// "Keys in a hierarchy"; `make bench` runs it.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

const (
	prefixKeys      = 10000 // keys under the prefix
	prefixFollowers = 10    // streams of the prefix
	prefixChanges   = 50    // changes timed to every follower
	prefixPage      = 1000  // the list's limit=
	prefixAdds      = 10    // keys added, then removed, timed to every follower
)

// BenchmarkPrefixStream10k: 10,000 keys under one prefix (bench/big/k-00000
// ...), put through the sidecar (16 puts at once), the sidecar run as a
// process of its own (as BenchmarkPicture10k's is). It reports:
//   - the subtree listed in pages (GET /v1/kv?prefix=bench/big/&recursive=true,
//     limit=1000, following next): list-pages and list-ms, every key checked
//     listed once;
//   - 10 followers of GET /v1/kv/events?prefix=bench/big/, opened one after the
//     other: the time until the first has shown every key (first-state-ms: it
//     starts the stream's reads, first-state-zk-req of them) and until the
//     tenth has (tenth-first-state-ms), and the sidecar's VmRSS before the
//     first (rss-MiB-none), with the first (rss-MiB-one) and with all 10
//     (rss-MiB);
//   - 50 puts of existing keys under the prefix, one at a time: from just
//     before the PUT is sent until the benchmark has read the new value from
//     every follower (fanout-p50-ms, fanout-p99-ms; ns/op is their mean);
//   - ZooKeeper requests of the sidecar's session (ZooKeeper's own count,
//     `cons`) per such put with the 10 followers (zk-req/change), against per
//     put of a key no stream follows (zk-req/put-unfollowed): their difference
//     is what the stream reads per change; a read per key would be 10,000;
//   - 10 keys added under the prefix, then removed, each timed to every
//     follower as the puts are (added-p50-ms, removed-p50-ms), with the
//     ZooKeeper requests of each (zk-req/add, zk-req/remove).
func BenchmarkPrefixStream10k(b *testing.B) { sidecartest.RunOnce(b, &prefixLast, prefixStream10k) }

var prefixLast *sidecartest.BenchResult

func prefixStream10k(b *testing.B) sidecartest.BenchResult {
	zkc := zktest.Shared(b)
	root := zktest.Root(b)
	car, pid := ebStartProcess(b, zkc.Servers(), root)
	sid := sidecartest.Str(car.Must(b, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	const prefix = "bench/big/"
	key := func(i int) string { return fmt.Sprintf("%sk-%05d", prefix, i) }
	put := func(k, v string) error { return prefixPut(car, k, v) }
	made := prefixMake(b, car, key)
	pages, listTook := prefixList(b, car, prefix)
	rssNone := ebRSS(b, pid)

	received := func() int64 { return zktest.Received(b, zkc.Server(0), sid) }
	streams := make([]*sidecartest.Stream, prefixFollowers)
	var first, tenth time.Duration
	var firstReads int64
	var rssOne int64
	for f := range streams {
		t0, r0 := time.Now(), received()
		streams[f] = car.OpenStream(b, "/v1/kv/events?prefix="+url.QueryEscape(prefix))
		prefixFirstState(b, streams[f])
		switch f {
		case 0:
			first, firstReads, rssOne = time.Since(t0), received()-r0, ebRSS(b, pid)
		case prefixFollowers - 1:
			tenth = time.Since(t0)
		}
	}
	rss := ebRSS(b, pid)

	// ZooKeeper requests per put of a key no stream follows, then per put under
	// the prefix: the same number of puts, one at a time, each waited for.
	before := received()
	for j := range prefixChanges {
		if err := put("bench/other", fmt.Sprintf("o%d", j)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the same pace as the changes below
	}
	unfollowed := float64(received()-before) / prefixChanges

	before = received()
	fanout := make([]time.Duration, 0, prefixChanges)
	for j := range prefixChanges {
		k, v := key(j*7919%prefixKeys), fmt.Sprintf("c%d", j)
		fanout = append(fanout, prefixFanout(b, streams, func() error { return put(k, v) }, func(ev sidecartest.Event) bool {
			return ev.Data["key"] == k && ev.Data["value"] == v
		}))
	}
	perChange := float64(received()-before) / prefixChanges

	// Keys added under the prefix, then removed: the children of the prefix's
	// node change, 10,000 of them, not only a key's value.
	added := make([]time.Duration, 0, prefixAdds)
	before = received()
	for j := range prefixAdds {
		k := fmt.Sprintf("%snew-%02d", prefix, j)
		added = append(added, prefixFanout(b, streams, func() error { return put(k, "n") }, func(ev sidecartest.Event) bool {
			return ev.Data["key"] == k && ev.Data["deleted"] != true
		}))
	}
	perAdd := float64(received()-before) / prefixAdds
	removed := make([]time.Duration, 0, prefixAdds)
	before = received()
	for j := range prefixAdds {
		k := fmt.Sprintf("%snew-%02d", prefix, j)
		removed = append(removed, prefixFanout(b, streams, func() error {
			r, err := car.Do(context.Background(), http.MethodDelete, "/v1/kv/"+k, nil)
			if err == nil && r.Status != http.StatusNoContent {
				err = fmt.Errorf("delete %s: %d %v", k, r.Status, r.Body)
			}
			return err
		}, func(ev sidecartest.Event) bool {
			return ev.Data["key"] == k && ev.Data["deleted"] == true
		}))
	}
	perRemove := float64(received()-before) / prefixAdds
	qa, qr := sidecartest.Quantiles(added), sidecartest.Quantiles(removed)
	b.Logf("a key added under the prefix to all %d followers p50 %v max %v, %.2f ZooKeeper requests; removed p50 %v max %v, %.2f requests",
		prefixFollowers, qa.P50, qa.Max, perAdd, qr.P50, qr.Max, perRemove)

	q := sidecartest.Quantiles(fanout)
	b.Logf("%d keys put in %v; listed in %d pages of %d in %v; first state %v with %d ZooKeeper requests (tenth follower %v); VmRSS %.1f MiB with no follower, %.1f MiB with one, %.1f MiB with %d; a put to all %d followers p50 %v p99 %v max %v; ZooKeeper requests a put: %.2f unfollowed, %.2f under the prefix",
		prefixKeys, made.Round(time.Millisecond), pages, prefixPage, listTook.Round(time.Millisecond), first.Round(time.Millisecond), firstReads, tenth.Round(time.Millisecond),
		float64(rssNone)/(1<<20), float64(rssOne)/(1<<20), float64(rss)/(1<<20), prefixFollowers, prefixFollowers, q.P50, q.P99, q.Max, unfollowed, perChange)
	return sidecartest.BenchResult{Samples: len(fanout), Mean: q.Mean, Metrics: map[string]float64{
		"list-pages":            float64(pages),
		"list-ms":               sidecartest.Millis(listTook),
		"first-state-ms":        sidecartest.Millis(first),
		"tenth-first-state-ms":  sidecartest.Millis(tenth),
		"first-state-zk-req":    float64(firstReads),
		"rss-MiB-none":          float64(rssNone) / (1 << 20),
		"rss-MiB-one":           float64(rssOne) / (1 << 20),
		"rss-MiB":               float64(rss) / (1 << 20),
		"fanout-p50-ms":         sidecartest.Millis(q.P50),
		"fanout-p99-ms":         sidecartest.Millis(q.P99),
		"zk-req/change":         perChange,
		"zk-req/put-unfollowed": unfollowed,
		"added-p50-ms":          sidecartest.Millis(qa.P50),
		"removed-p50-ms":        sidecartest.Millis(qr.P50),
		"zk-req/add":            perAdd,
		"zk-req/remove":         perRemove,
	}}
}

// prefixFanout runs do (a change under the prefix) and answers the time from
// just before it until the benchmark has read a kv event that match accepts
// from every stream; then it lets 20 ms pass, so that the next change starts
// from quiet.
func prefixFanout(b *testing.B, streams []*sidecartest.Stream, do func() error, match func(sidecartest.Event) bool) time.Duration {
	b.Helper()
	t0 := time.Now()
	if err := do(); err != nil {
		b.Fatal(err)
	}
	for _, st := range streams {
		sidecartest.AwaitEvent(b, st, 30*time.Second, "the change", func(ev sidecartest.Event) bool {
			return ev.Name == "kv" && match(ev)
		})
	}
	took := time.Since(t0)
	time.Sleep(20 * time.Millisecond) // the next change starts from quiet
	return took
}

// prefixFirstState reads st until it has shown every key under the prefix.
func prefixFirstState(b *testing.B, st *sidecartest.Stream) {
	b.Helper()
	within := testutil.Patience(5 * time.Minute)
	deadline := time.Now().Add(within)
	seen := make(map[string]bool, prefixKeys)
	for len(seen) < prefixKeys {
		left := time.Until(deadline)
		if left <= 0 {
			b.Fatalf("the first state showed %d of %d keys within %v", len(seen), prefixKeys, within)
		}
		ev := st.Recv(b, left)
		if ev.Name == "kv" && ev.Data["deleted"] != true {
			seen[sidecartest.Str(ev.Data["key"])] = true
		}
	}
}

// prefixPut puts value v in key k through car.
func prefixPut(car *sidecartest.Sidecar, k, v string) error {
	r, err := car.Do(context.Background(), http.MethodPut, "/v1/kv/"+k, strings.NewReader(v), "Content-Type", "text/plain")
	if err != nil {
		return fmt.Errorf("put %s: %w", k, err)
	}
	if r.Status != http.StatusOK && r.Status != http.StatusCreated {
		return fmt.Errorf("put %s: %d %v", k, r.Status, r.Body)
	}
	return nil
}

// prefixMake puts the keys key(0)...key(prefixKeys-1) through car, the first
// alone (it makes the parents), then 16 at a time; it answers how long it took.
func prefixMake(b *testing.B, car *sidecartest.Sidecar, key func(int) string) time.Duration {
	b.Helper()
	start := time.Now()
	if err := prefixPut(car, key(0), "v0"); err != nil {
		b.Fatal(err)
	}
	err := sidecartest.InParallel(1, prefixKeys, 16, func(i int) error {
		return prefixPut(car, key(i), fmt.Sprintf("v%d", i))
	})
	if err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// prefixList lists the keys under prefix in pages of prefixPage, following
// next, checks each key is listed once and all are, and answers the pages and
// how long they took.
func prefixList(b *testing.B, car *sidecartest.Sidecar, prefix string) (int, time.Duration) {
	b.Helper()
	pages, listed := 0, map[string]bool{}
	start := time.Now()
	for after := ""; pages == 0 || after != ""; {
		q := "/v1/kv?recursive=true&limit=" + fmt.Sprint(prefixPage) + "&prefix=" + url.QueryEscape(prefix)
		if after != "" {
			q += "&after=" + url.QueryEscape(after)
		}
		r := car.Must(b, http.StatusOK, http.MethodGet, q)
		pages++
		items, _ := r.Body["kv"].([]any)
		for _, it := range items {
			item, _ := it.(map[string]any)
			k := sidecartest.Str(item["key"])
			if listed[k] {
				b.Fatalf("%s listed twice", k)
			}
			listed[k] = true
		}
		after = sidecartest.Str(r.Body["next"])
	}
	took := time.Since(start)
	if len(listed) != prefixKeys {
		b.Fatalf("the list showed %d of %d keys", len(listed), prefixKeys)
	}
	return pages, took
}
