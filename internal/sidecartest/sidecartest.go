// Package sidecartest runs the real coord-sidecar (sidecar.Main, flags and
// all) on a loopback port against a real ZooKeeper, for the tests of every
// package that drives it over HTTP, and reads its answers and streams.
package sidecartest

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

	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Sidecar is one running coord-sidecar (the real Main) under test, or the
// address of one running elsewhere (m is nil). It holds no testing.TB: every
// method that can fail a test, or that opens something to close at its end,
// takes the TB of the (sub)test that calls it.
type Sidecar struct {
	M    *sidecar.Main
	Base string
	// Client reaches it (nil: http.DefaultClient); Hdr is sent with every
	// request of Do, Must and OpenStream (name/value pairs, e.g. a token).
	Client *http.Client
	Hdr    []string
}

// HC is the client that reaches s.
func (s *Sidecar) HC() *http.Client {
	if s.Client != nil {
		return s.Client
	}
	return http.DefaultClient
}

// Start runs a sidecar against servers with the given root, listening on a
// free loopback port; it is closed in t's Cleanup. extra flags override the
// defaults.
func Start(t testing.TB, servers []string, root string, extra ...string) *Sidecar {
	t.Helper()
	s := Run(t, servers, root, extra...)
	s.WaitReady(t)
	return s
}

// Run is Start without waiting for it to be ready.
func Run(t testing.TB, servers []string, root string, extra ...string) *Sidecar {
	t.Helper()
	m := sidecar.NewMain()
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
	s := &Sidecar{M: m, Base: "http://" + m.Addr()}
	t.Cleanup(func() { _ = m.Close() })
	return s
}

// WaitReady waits until the sidecar answers /readyz with 200.
func (s *Sidecar) WaitReady(t testing.TB) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "sidecar "+s.Base+" ready", func() bool {
		resp, err := s.HC().Get(s.Base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// Response is a decoded answer.
type Response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// Do sends one request and decodes a JSON answer. It never calls t.Fatal, so it is
// safe from goroutines; transport errors come back as err.
func (s *Sidecar) Do(ctx context.Context, method, path string, body io.Reader, hdr ...string) (*Response, error) {
	return DoWith(ctx, s.HC(), s.Base, method, path, body, append(slices.Clone(s.Hdr), hdr...)...)
}

// DoWith sends one request through client (with header name/value pairs) and
// decodes a JSON answer.
func DoWith(ctx context.Context, client *http.Client, base, method, path string, body io.Reader, hdr ...string) (*Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, body)
	if err != nil {
		return nil, err
	}
	SetHeaders(req, hdr)
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	r := &Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(raw, &r.Body); err != nil {
			return nil, fmt.Errorf("%s %s: bad JSON %q: %w", method, path, raw, err)
		}
	}
	return r, nil
}

// SetHeaders sets name/value pairs on req; "Host" sets the Host it is sent with.
func SetHeaders(req *http.Request, hdr []string) {
	for i := 0; i+1 < len(hdr); i += 2 {
		if http.CanonicalHeaderKey(hdr[i]) == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
}

// Must is Do that fails t (from t's goroutine only) unless the status is want.
func (s *Sidecar) Must(t testing.TB, want int, method, path string) *Response {
	t.Helper()
	r, err := s.Do(context.Background(), method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	return r
}

// Event is one server-sent event, its data decoded as a JSON object (nil if
// it is not one).
type Event struct {
	ID, Name string
	Data     map[string]any
}

// ReadEvents reads the events of an SSE body with sse.NewReader and hands each
// to each, until the body ends (it returns io.EOF), breaks (the error), or each
// returns false (nil).
func ReadEvents(body io.Reader, each func(Event) bool) error {
	r := sse.NewReader(body)
	for {
		e, err := r.Next()
		if err != nil {
			return err
		}
		ev := Event{ID: e.ID, Name: e.Name}
		_ = json.Unmarshal(e.Data, &ev.Data)
		if !each(ev) {
			return nil
		}
	}
}

// Stream is an open SSE response read event by event.
type Stream struct {
	Cancel context.CancelFunc // closes the stream
	Events chan Event
	Done   chan struct{} // closed when the stream has ended and its reader returned
}

// OpenStream opens an SSE stream (with header name/value pairs) and reads its
// events on a goroutine. The stream belongs to t: it is closed, and its reader
// has returned, by the end of t (a subtest's streams end with the subtest).
func (s *Sidecar) OpenStream(t testing.TB, path string, hdr ...string) *Stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+path, nil)
	SetHeaders(req, append(slices.Clone(s.Hdr), hdr...))
	resp, err := s.HC().Do(req)
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
	st := &Stream{Cancel: cancel, Events: make(chan Event, 64), Done: make(chan struct{})}
	go func() {
		defer close(st.Done)
		defer resp.Body.Close()
		_ = ReadEvents(resp.Body, func(ev Event) bool {
			select {
			case st.Events <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-st.Done
	})
	return st
}

// Next waits for the next event, failing t past within made testutil.Patience.
func (st *Stream) Next(t testing.TB, within time.Duration) Event {
	t.Helper()
	return st.Recv(t, testutil.Patience(within))
}

// Recv is Next with within as it is: for loops that made their own bound patient.
func (st *Stream) Recv(t testing.TB, within time.Duration) Event {
	t.Helper()
	select {
	case ev := <-st.Events:
		return ev
	case <-st.Done:
		select {
		case ev := <-st.Events:
			return ev
		default:
		}
		t.Fatal("stream ended before the next event")
	case <-time.After(within):
		t.Fatalf("no event within %s", within)
	}
	return Event{}
}

// Num is a JSON number as an int64 (0 if v is none).
func Num(v any) int64 {
	f, _ := v.(float64)
	return int64(f)
}

// Str is a JSON string (empty if v is none).
func Str(v any) string { s, _ := v.(string); return s }
