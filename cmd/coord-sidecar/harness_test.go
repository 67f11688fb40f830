package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// TestMain runs the package's tests against the ZooKeeper servers they start.
//
// Which tests run in parallel: go test runs every test that does not call
// t.Parallel first, one at a time, and then the parallel ones together (make
// test allows 4 at once). A test is parallel when it is long, mostly waits
// (on servers of its own that it starts, kills or cuts, on Prism, Chromium or
// a script's processes) and reads nothing of the process as a whole (heap,
// goroutines, file limits, default transports, environment). Tests that
// measure the process (load_test.go) stay serial, so nothing runs beside them.
func TestMain(m *testing.M) {
	code := zktest.Main(m)
	removeBuiltBinary()
	os.Exit(code)
}

// sidecar is one running coord-sidecar (the real Main) under test, or the
// address of one running elsewhere (m is nil). It holds no testing.TB: every
// method that can fail a test, or that opens something to close at its end,
// takes the TB of the (sub)test that calls it.
type sidecar struct {
	m    *Main
	base string
	// client reaches it (nil: http.DefaultClient); hdr is sent with every
	// request of do, must and openStream (name/value pairs, e.g. a token).
	client *http.Client
	hdr    []string
}

func (s *sidecar) hc() *http.Client {
	if s.client != nil {
		return s.client
	}
	return http.DefaultClient
}

// startSidecar runs a sidecar against servers with the given root, listening on a
// free loopback port; it is closed in t's Cleanup. extra flags override the
// defaults.
func startSidecar(t testing.TB, servers []string, root string, extra ...string) *sidecar {
	t.Helper()
	s := runSidecar(t, servers, root, extra...)
	s.waitReady(t)
	return s
}

// runSidecar is startSidecar without waiting for it to be ready.
func runSidecar(t testing.TB, servers []string, root string, extra ...string) *sidecar {
	t.Helper()
	m := NewMain()
	m.LogOutput = io.Discard
	if testing.Verbose() && os.Getenv("SIDECAR_LOGS") != "" {
		m.LogOutput = os.Stderr
	}
	args := append([]string{
		"--listen", "127.0.0.1:0", "--zk", strings.Join(servers, ","), "--zk-root", root,
		"--session-timeout", "2s",
	}, extra...)
	if err := m.ParseFlags(args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := &sidecar{m: m, base: "http://" + m.Addr()}
	t.Cleanup(func() { _ = m.Close() })
	return s
}

// waitReady waits until the sidecar answers /readyz with 200.
func (s *sidecar) waitReady(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "sidecar "+s.base+" ready", func() bool {
		resp, err := s.hc().Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// response is a decoded answer.
type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// do sends one request and decodes a JSON answer. It never calls t.Fatal, so it is
// safe from goroutines; transport errors come back as err.
func (s *sidecar) do(ctx context.Context, method, path string, body io.Reader, hdr ...string) (*response, error) {
	return doWith(ctx, s.hc(), s.base, method, path, body, append(slices.Clone(s.hdr), hdr...)...)
}

// doWith sends one request through client (with header name/value pairs) and
// decodes a JSON answer.
func doWith(ctx context.Context, client *http.Client, base, method, path string, body io.Reader, hdr ...string) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, err
	}
	setHeaders(req, hdr)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := &response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &r.Body); err != nil {
			return nil, fmt.Errorf("%s %s: bad JSON %q: %w", method, path, raw, err)
		}
	}
	return r, nil
}

// setHeaders sets name/value pairs on req; "Host" sets the Host it is sent with.
func setHeaders(req *http.Request, hdr []string) {
	for i := 0; i+1 < len(hdr); i += 2 {
		if http.CanonicalHeaderKey(hdr[i]) == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
}

// must is do that fails t (from t's goroutine only) unless the status is want.
func (s *sidecar) must(t testing.TB, want int, method, path string) *response {
	t.Helper()
	r, err := s.do(context.Background(), method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	return r
}

// sseEvent is one server-sent event, its data decoded as a JSON object (nil if
// it is not one).
type sseEvent struct {
	ID, Name string
	Data     map[string]any
}

// readEvents reads the events of an SSE body with sse.NewReader and hands each
// to each, until the body ends (it returns io.EOF), breaks (the error), or each
// returns false (nil).
func readEvents(body io.Reader, each func(sseEvent) bool) error {
	r := sse.NewReader(body)
	for {
		e, err := r.Next()
		if err != nil {
			return err
		}
		ev := sseEvent{ID: e.ID, Name: e.Name}
		_ = json.Unmarshal(e.Data, &ev.Data)
		if !each(ev) {
			return nil
		}
	}
}

// stream is an open SSE response read event by event.
type stream struct {
	cancel context.CancelFunc // closes the stream
	events chan sseEvent
	done   chan struct{} // closed when the stream has ended and its reader returned
}

// openStream opens an SSE stream (with header name/value pairs) and reads its
// events on a goroutine. The stream belongs to t: it is closed, and its reader
// has returned, by the end of t (a subtest's streams end with the subtest).
func (s *sidecar) openStream(t testing.TB, path string, hdr ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+path, nil)
	setHeaders(req, append(slices.Clone(s.hdr), hdr...))
	resp, err := s.hc().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	st := &stream{cancel: cancel, events: make(chan sseEvent, 64), done: make(chan struct{})}
	go func() {
		defer close(st.done)
		defer resp.Body.Close()
		_ = readEvents(resp.Body, func(ev sseEvent) bool {
			select {
			case st.events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-st.done
	})
	return st
}

// next waits for the next event, failing t past within made testutil.Patience.
func (st *stream) next(t testing.TB, within time.Duration) sseEvent {
	t.Helper()
	return st.recv(t, testutil.Patience(within))
}

// recv is next with within as it is: for loops that made their own bound patient.
func (st *stream) recv(t testing.TB, within time.Duration) sseEvent {
	t.Helper()
	select {
	case ev := <-st.events:
		return ev
	case <-st.done:
		select {
		case ev := <-st.events:
			return ev
		default:
		}
		t.Fatal("stream ended before the next event")
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
	}
	return sseEvent{}
}

func num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

func str(v any) string { s, _ := v.(string); return s }
