package sidecartest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// FaultClient is the HTTP client of the fault and load tests: its own pool, large
// enough that concurrent clients keep their connections instead of churning
// through ephemeral ports. Every request through it carries its own deadline.
var FaultClient = &http.Client{Transport: &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	MaxIdleConns:        512,
	MaxIdleConnsPerHost: 128,
	IdleConnTimeout:     30 * time.Second,
}}

// ErrRequestTimeout marks a request that got no answer within its client timeout.
var ErrRequestTimeout = errors.New("no answer within the client timeout")

// FaultCall sends one request bounded by timeout through FaultClient and decodes a
// JSON answer. It never calls t.Fatal (safe from goroutines); a request that is
// not answered in time returns an error wrapping ErrRequestTimeout.
func (s *Sidecar) FaultCall(timeout time.Duration, method, path string) (*Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := DoWith(ctx, FaultClient, s.Base, method, path, nil)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%s %s: %w (%v)", method, path, ErrRequestTimeout, err)
	}
	return r, err
}

// ProblemType is the short name of a problem document's type ("" if none).
func ProblemType(r *Response) string {
	if r == nil {
		return ""
	}
	return strings.TrimPrefix(Str(r.Body["type"]), "https://coord-sidecar.dev/problems/")
}

// PutKey sends PUT /v1/kv/... with body and Content-Type ct.
func (s *Sidecar) PutKey(ctx context.Context, path string, body []byte, ct string) (*Response, error) {
	return s.Do(ctx, http.MethodPut, path, bytes.NewReader(body), "Content-Type", ct)
}

// MustPut is PutKey that fails t unless the answer is 200.
func (s *Sidecar) MustPut(t testing.TB, path string, body []byte, ct string) *Response {
	t.Helper()
	r, err := s.PutKey(context.Background(), path, body, ct)
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("PUT %s: %v %+v", path, err, r)
	}
	return r
}

// StreamStatus opens a stream, returns its status code and closes it.
func (s *Sidecar) StreamStatus(path string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+path, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

// PutItem enqueues item to queue through car.
func (s *Sidecar) PutItem(t testing.TB, queue, item string) {
	t.Helper()
	r, err := s.Do(context.Background(), http.MethodPost, "/v1/queues/"+queue+"/items", strings.NewReader(item), "Content-Type", "text/plain")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("enqueue %s: %v %+v", item, err, r)
	}
}

// Send makes a request with a JSON body and fails t (from t's goroutine only)
// unless the status is want.
func (s *Sidecar) Send(t testing.TB, want int, method, path, body string) *Response {
	t.Helper()
	r, err := s.Do(context.Background(), method, path, strings.NewReader(body), "Content-Type", "application/json")
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != want {
		t.Fatalf("%s %s %s: status %d, want %d: %s", method, path, body, r.Status, want, r.Raw)
	}
	return r
}

// As is a copy of the sidecar's handle that sends hdr (e.g. a token) too.
func (s *Sidecar) As(hdr ...string) *Sidecar {
	c := *s
	c.Hdr = append(slices.Clone(s.Hdr), hdr...)
	return &c
}

func Bearer(token string) []string { return []string{"Authorization", "Bearer " + token} }

// ProblemIs fails unless r is the problem name with status.
func ProblemIs(t *testing.T, r *Response, status int, name string) {
	t.Helper()
	if r.Status != status || !strings.HasSuffix(Str(r.Body["type"]), "/problems/"+name) {
		t.Fatalf("want %d %s, got %d: %s", status, name, r.Status, r.Raw)
	}
}

// DoReq is do that fails t (from t's goroutine only) on a transport error.
func (s *Sidecar) DoReq(t testing.TB, method, path string, body io.Reader, hdr ...string) *Response {
	t.Helper()
	r, err := s.Do(context.Background(), method, path, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func MustInt(t testing.TB, s string) int64 {
	t.Helper()
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("event id %q: %v", s, err)
	}
	return n
}

// Metrics reads the values of the given unlabelled metrics from the sidecar's
// /metrics, in the order given.
func Metrics(b testing.TB, car *Sidecar, names ...string) []float64 {
	b.Helper()
	r := car.Must(b, http.StatusOK, http.MethodGet, "/metrics")
	out := make([]float64, len(names))
	found := 0
	for line := range strings.Lines(string(r.Raw)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if i := slices.Index(names, name); ok && i >= 0 {
			v, err := strconv.ParseFloat(value, 64)
			if err != nil {
				b.Fatalf("/metrics: %q: %v", line, err)
			}
			out[i] = v
			found++
		}
	}
	if found != len(names) {
		b.Fatalf("/metrics lacks one of %v", names)
	}
	return out
}

// MetricValue reads one series' value from the sidecar's /metrics (0 when absent).
func MetricValue(t testing.TB, car *Sidecar, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(string(car.Must(t, 200, "GET", "/metrics").Raw), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// WriteFile writes data to dir/name (atomically, by a rename, as a certificate
// manager does) and returns the path.
func WriteFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// SyncBuffer is a bytes.Buffer safe for the writer (exec's copying goroutine)
// and a reader (the test) at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

const AppAuth = "digest:app:s3cret"

// ZkClient is a plain go-zookeeper client, with the digest credentials
// user:password when given.
func ZkClient(t *testing.T, servers []string, userPassword string) *zk.Conn {
	t.Helper()
	c := zktest.Connect(t, servers, 4*time.Second)
	if userPassword != "" {
		if err := c.AddAuth("digest", []byte(userPassword)); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
