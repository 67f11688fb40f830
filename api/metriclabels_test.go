package api_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Metric labels are bounded (issue 24): no label value of the HTTP metrics
// comes from a request but routes of the router's own table and the standard
// methods, so made-up methods and paths, refused or not, add no series.
func TestMadeUpMethodsAndPathsAddNoSeries(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	const token = "metrics-token-0123456789"
	open := sidecartest.Start(t, zkc.Servers(), root)
	guarded := sidecartest.Start(t, zkc.Servers(), root, "--token", token)
	withToken := guarded.As(sidecartest.Bearer(token)...)

	type hostile struct {
		car          *sidecartest.Sidecar
		method, path string
		status       int
	}
	// round i: one request of each kind, with a method and paths no other
	// round uses; answered 401, 404 or 405.
	round := func(i int) []hostile {
		method := fmt.Sprintf("M%d%s", i, strings.Repeat("X", 8000))
		path := fmt.Sprintf("/v1/made-up-%d/%s", i, strings.Repeat("p", 200))
		outside := fmt.Sprintf("/made-up-%d", i)
		return []hostile{
			{open, method, "/v1/locks/x", http.StatusMethodNotAllowed},
			{open, http.MethodGet, path, http.StatusNotFound},
			{open, method, path, http.StatusMethodNotAllowed},
			{open, http.MethodPost, outside, http.StatusNotFound},
			{open, strings.ToLower(http.MethodGet) + strconv.Itoa(i), "/v1/session", http.StatusMethodNotAllowed},
			{guarded, method, "/v1/locks/x", http.StatusUnauthorized},
			{guarded, http.MethodGet, path, http.StatusUnauthorized},
			{withToken, method, "/v1/locks/x", http.StatusMethodNotAllowed},
			{withToken, http.MethodDelete, path, http.StatusNotFound},
		}
	}
	sent := map[*sidecar.Main]int{} // requests sent to each sidecar process
	send := func(i int) {
		for _, h := range round(i) {
			r := h.car.DoReq(t, h.method, h.path, nil)
			if r.Status != h.status {
				t.Fatalf("%.40s %.60s: %d, want %d: %.200s", h.method, h.path, r.Status, h.status, r.Raw)
			}
			sent[h.car.M]++
		}
	}
	// A first scrape, so that /metrics's own series are there from the start;
	// then one request of each kind.
	for _, car := range []*sidecartest.Sidecar{open, guarded} {
		scrapeHTTPSeries(t, car)
	}
	send(0)
	first := map[*sidecar.Main]int{}
	for _, car := range []*sidecartest.Sidecar{open, guarded} {
		first[car.M] = countedHTTPSeries(t, car, sent[car.M])
	}
	// 40 more rounds: a label taken from a request would add 40 series per
	// kind (a bound that grows with the rounds is the same claim at any size).
	const rounds = 40
	for i := 1; i <= rounds; i++ {
		send(i)
	}
	for _, car := range []*sidecartest.Sidecar{open, guarded} {
		if n := countedHTTPSeries(t, car, sent[car.M]); n != first[car.M] {
			t.Errorf("%s: %d coord_http_ series after %d requests of each kind, %d after one", car.Base, n, rounds+1, first[car.M])
		}
	}
}

// probeOrScrape matches the series of the requests the test does not count:
// readiness probes (waitReady) and scrapes.
var probeOrScrape = regexp.MustCompile(`route="GET /(readyz|healthz|metrics)"`)

// countedHTTPSeries waits until the sidecar's coord_http_requests_total counts
// want requests besides probes and scrapes (a request is counted once its answer is
// written, which a client may see first), then answers its coord_http_ series.
func countedHTTPSeries(t *testing.T, car *sidecartest.Sidecar, want int) int {
	t.Helper()
	var series []string
	testutil.Eventually(t, 30*time.Second, fmt.Sprintf("%s counts %d requests", car.Base, want), func() bool {
		series = scrapeHTTPSeries(t, car)
		total := 0.0
		for _, s := range series {
			if strings.HasPrefix(s, "coord_http_requests_total{") && !probeOrScrape.MatchString(s) {
				v, err := strconv.ParseFloat(s[strings.LastIndexByte(s, ' ')+1:], 64)
				if err != nil {
					t.Fatalf("series %.200s: %v", s, err)
				}
				total += v
			}
		}
		return total == float64(want)
	})
	long := 0
	for _, s := range series {
		if len(s) > 300 {
			if long++; long == 1 {
				t.Errorf("a series of %d bytes: %.300s...", len(s), s)
			}
		}
	}
	if long > 1 {
		t.Errorf("%d series of more than 300 bytes", long)
	}
	return len(series)
}

// scrapeHTTPSeries answers the coord_http_ sample lines of the sidecar's /metrics.
func scrapeHTTPSeries(t *testing.T, car *sidecartest.Sidecar) []string {
	t.Helper()
	resp, err := car.HC().Get(car.Base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	var out []string
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "coord_http_") {
			out = append(out, line)
		}
	}
	return out
}
