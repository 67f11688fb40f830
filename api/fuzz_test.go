package api_test

// Fuzzing of the HTTP surface (issue 6; docs/RELIABILITY.md). The targets drive the
// real handler (registry.New over real recipes and a real ZooKeeper from
// zktest.Shared, served by httptest) with arbitrary methods, paths, names, query
// strings and bodies, and check what every answer must be:
//
//   - no 5xx, except 501 not-implemented (the placeholders of recipes still being
//     built) and 503 while the ZooKeeper session is not connected (it stays
//     connected here, so a 503 zookeeper-unavailable is a failure);
//   - no panic (the recoverer would answer 500; a panic elsewhere kills the run);
//   - an answer within 10 seconds;
//   - every non-2xx answer is an RFC 9457 problem document: Content-Type
//     application/problem+json, a JSON object with type (under ProblemBase), title,
//     status equal to the HTTP status, and instance; a 503 carries Retry-After;
//   - every 2xx answer of /v1 is JSON (event streams: text/event-stream; a queue
//     item taken or claimed: its own bytes and Content-Type), and 204 has no body.
//
// Two rewrites keep each input cheap and let it reach live state, and are part of
// the harness, not of the server:
//
//   - every wait= value longer than 50ms is rewritten to 50ms before sending (the
//     server accepts up to --max-wait; a fuzzer waiting minutes per input finds
//     nothing), and an event stream is closed as soon as its first bytes arrive;
//   - the marker LEASE in the path or the query is replaced by the id of a live
//     lease made for that input, so that lease-bound routes are reached.
//
// The server runs with a 4 KiB body limit so that the oversized-body seeds stay
// small.
//
// Run: go test -run '^$' -fuzz FuzzRequest -fuzztime 3m ./api/
//      go test -run '^$' -fuzz FuzzEndpoint -fuzztime 3m ./api/
// The seed corpora under testdata/fuzz/ run as ordinary tests in `go test`.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	coordsidecar "github.com/coord-sidecar/coord-sidecar"
	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/registry"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func TestMain(m *testing.M) { os.Exit(sidecartest.Main(m)) }

// maxFuzzWait is the longest wait= the harness lets through.
const maxFuzzWait = 50 * time.Millisecond

// fuzzServer is the real HTTP surface over a real ZooKeeper session.
type fuzzServer struct {
	base   string
	sess   *zookeeper.Session
	leases *kit.Leases
	client *http.Client
}

func newFuzzServer(f *testing.F) *fuzzServer {
	f.Helper()
	zkc := zktest.Shared(f)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	sess, err := zookeeper.NewSession(zookeeper.Config{Servers: zkc.Servers(), Timeout: 10 * time.Second, Root: zktest.Root(f), Logger: log})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(sess.Close)
	deadline := time.After(30 * time.Second)
	for sess.State() != zookeeper.StateConnected {
		select {
		case <-sess.Changed():
		case <-deadline:
			f.Fatalf("no ZooKeeper session within 30s: %s", sess.State())
		}
	}
	leases := kit.NewLeases(sess, nil)
	f.Cleanup(leases.Close)
	srv := registry.New(api.Options{Session: sess, Leases: leases, MaxBody: 4096, Spec: coordsidecar.OpenAPI, Logger: log})
	ts := httptest.NewServer(srv.Handler())
	f.Cleanup(ts.Close)
	f.Cleanup(srv.Close)
	return &fuzzServer{base: ts.URL, sess: sess, leases: leases, client: ts.Client()}
}

var methodRE = regexp.MustCompile(`^[A-Z]{1,12}$`)

// opaqueItemRE matches the routes whose 200 is a queue item's own bytes.
var opaqueItemRE = regexp.MustCompile(`^/v1/queues/[^/]+/(take|claims)$`)

// capWait rewrites every wait= value above maxFuzzWait to "50ms", leaving every
// other byte of the query as it was.
func capWait(rawQuery string) string {
	parts := strings.Split(rawQuery, "&")
	for i, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		key, err := url.QueryUnescape(k)
		if err != nil || key != "wait" {
			continue
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			continue
		}
		if d, err := time.ParseDuration(val); err == nil && d > maxFuzzWait {
			parts[i] = k + "=" + maxFuzzWait.String()
		}
	}
	return strings.Join(parts, "&")
}

// roundTrip sends one input and checks the answer.
func (s *fuzzServer) roundTrip(t *testing.T, method, path, rawQuery string, body []byte) {
	if !methodRE.MatchString(method) {
		return // not a method a client can send
	}
	if strings.Contains(path+rawQuery, "LEASE") {
		l, err := s.leases.Grant(10*time.Second, false)
		if err != nil {
			t.Fatalf("grant a lease for the input: %v", err)
		}
		path = strings.ReplaceAll(path, "LEASE", l.ID)
		rawQuery = strings.ReplaceAll(rawQuery, "LEASE", l.ID)
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	u, err := url.Parse(s.base + path)
	if err != nil || u.Host != strings.TrimPrefix(s.base, "http://") {
		return // not a path a client can send
	}
	if strings.IndexFunc(rawQuery, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		// A space or control byte in the request-target makes the request line
		// malformed: net/http answers 400 text/plain before any handler runs (the
		// first input the fuzzer ever failed on, kept in the seed corpus).
		return
	}
	u.RawQuery = capWait(rawQuery)
	u.Fragment, u.RawFragment = "", ""
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return
	}
	changed := s.sess.Changed()
	connected := s.sess.State() == zookeeper.StateConnected
	resp, err := s.client.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "invalid") || strings.Contains(err.Error(), "malformed") {
			return // refused by the client library itself, before any byte was sent
		}
		t.Fatalf("%s %s: no answer: %v", method, u, err)
	}
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode == http.StatusOK && ct == "text/event-stream" {
		return // a stream opened: closing it is all the harness does
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, u, err)
	}
	select {
	case <-changed:
		connected = false // the session changed during the request
	default:
	}
	checkAnswer(t, method, u, resp, raw, connected)
}

// checkAnswer holds an answer to the contract.
func checkAnswer(t *testing.T, method string, u *url.URL, resp *http.Response, raw []byte, connected bool) {
	t.Helper()
	code, ct := resp.StatusCode, resp.Header.Get("Content-Type")
	what := fmt.Sprintf("%s %s: %d %s %q", method, u, code, ct, raw)
	switch {
	case code < 200 || (code >= 300 && code < 400):
		t.Fatalf("unexpected status: %s", what)
	case code < 300:
		checkSuccess(t, method, u, code, ct, raw, what)
	default:
		checkProblem(t, method, resp, raw, connected, what)
	}
}

// checkSuccess holds a 2xx answer to the contract: JSON on /v1 (but for a 204,
// which has no body, and a queue item).
func checkSuccess(t *testing.T, method string, u *url.URL, code int, ct string, raw []byte, what string) {
	t.Helper()
	if !strings.HasPrefix(u.Path, "/v1/") || method == http.MethodHead {
		return
	}
	if code == http.StatusNoContent {
		if len(raw) != 0 {
			t.Fatalf("204 with a body: %s", what)
		}
		return
	}
	if method == http.MethodPost && opaqueItemRE.MatchString(u.EscapedPath()) {
		return // a queue item, sent back with its own Content-Type (openapi: */*)
	}
	if ct != "application/json" || !json.Valid(raw) {
		t.Fatalf("2xx that is not JSON: %s", what)
	}
}

// checkProblem holds a 4xx or 5xx answer to the contract: an RFC 9457 problem
// document, and no 5xx but 501 not-implemented and a 503 (with Retry-After)
// while the session was not connected.
func checkProblem(t *testing.T, method string, resp *http.Response, raw []byte, connected bool, what string) {
	t.Helper()
	if resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("error without a problem document's Content-Type: %s", what)
	}
	if method == http.MethodHead {
		return
	}
	code := resp.StatusCode
	name := checkProblemDocument(t, code, raw, what)
	switch {
	case code == http.StatusNotImplemented && name == "not-implemented":
	case code == http.StatusServiceUnavailable:
		if resp.Header.Get("Retry-After") == "" {
			t.Fatalf("503 without Retry-After: %s", what)
		}
		if connected {
			t.Fatalf("503 while the ZooKeeper session was connected: %s", what)
		}
	case code >= 500:
		t.Fatalf("server error: %s", what)
	}
}

// checkProblemDocument holds raw to the form of a problem document with the
// given status and returns its type's name (under api.ProblemBase).
func checkProblemDocument(t *testing.T, code int, raw []byte, what string) string {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("problem document is not a JSON object (%v): %s", err, what)
	}
	typ, _ := p["type"].(string)
	name := strings.TrimPrefix(typ, api.ProblemBase)
	title, _ := p["title"].(string)
	status, _ := p["status"].(float64)
	_, hasInstance := p["instance"].(string)
	if name == "" || name == typ || title == "" || int(status) != code || !hasInstance {
		t.Fatalf("malformed problem document: %s", what)
	}
	if detail, ok := p["detail"]; ok {
		if _, isString := detail.(string); !isString {
			t.Fatalf("problem detail is not a string: %s", what)
		}
	}
	return name
}

// FuzzRequest sends arbitrary requests: method, path (with its escapes), raw
// query and body.
func FuzzRequest(f *testing.F) {
	s := newFuzzServer(f)
	f.Add("POST", "/v1/locks/x", "wait=1s", []byte(nil))
	f.Fuzz(func(t *testing.T, method, path, rawQuery string, body []byte) {
		s.roundTrip(t, method, path, rawQuery, body)
	})
}

// fuzzRoutes is every route of openapi.yaml; {name}, {id}, {lease}, {claim} and
// {group} are filled in from the fuzzer's strings.
var fuzzRoutes = []struct{ method, path string }{
	{"GET", "/healthz"},
	{"GET", "/readyz"},
	{"GET", "/metrics"},
	{"GET", "/openapi.yaml"},
	{"GET", "/v1/session"},
	{"GET", "/v1/session/events"},
	{"POST", "/v1/leases"},
	{"GET", "/v1/leases/{lease}"},
	{"DELETE", "/v1/leases/{lease}"},
	{"POST", "/v1/leases/{lease}/keepalive"},
	{"GET", "/v1/leases/{lease}/events"},
	{"POST", "/v1/locks/{name}"},
	{"GET", "/v1/locks/{name}"},
	{"DELETE", "/v1/locks/{name}"},
	{"GET", "/v1/elections/{name}"},
	{"POST", "/v1/elections/{name}/candidates"},
	{"PUT", "/v1/elections/{name}/candidates/{id}"},
	{"DELETE", "/v1/elections/{name}/candidates/{id}"},
	{"GET", "/v1/elections/{name}/events"},
	{"PUT", "/v1/barriers/{name}"},
	{"DELETE", "/v1/barriers/{name}"},
	{"GET", "/v1/barriers/{name}"},
	{"POST", "/v1/barriers/{name}/wait"},
	{"GET", "/v1/double-barriers/{name}"},
	{"POST", "/v1/double-barriers/{name}/participants"},
	{"DELETE", "/v1/double-barriers/{name}/participants/{id}"},
	{"GET", "/v1/queues/{name}"},
	{"POST", "/v1/queues/{name}/items"},
	{"GET", "/v1/queues/{name}/items"},
	{"POST", "/v1/queues/{name}/take"},
	{"POST", "/v1/queues/{name}/claims"},
	{"DELETE", "/v1/queues/{name}/claims/{claim}"},
	{"POST", "/v1/queues/{name}/claims/{claim}/release"},
	{"PUT", "/v1/throughput/{group}"},
	{"GET", "/v1/throughput/{group}"},
	{"POST", "/v1/throughput/{group}/members"},
	{"GET", "/v1/throughput/{group}/members/{id}"},
	{"PUT", "/v1/throughput/{group}/members/{id}"},
	{"DELETE", "/v1/throughput/{group}/members/{id}"},
	{"GET", "/v1/throughput/{group}/events"},
}

// FuzzEndpoint sends well-routed requests: route picks one route of the contract,
// name and id fill its path parameters (path-escaped, so any string is a name),
// with an arbitrary raw query and body.
func FuzzEndpoint(f *testing.F) {
	s := newFuzzServer(f)
	f.Add(uint8(11), "x", "", "wait=1s", []byte(nil))
	f.Fuzz(func(t *testing.T, route uint8, name, id, rawQuery string, body []byte) {
		r := fuzzRoutes[int(route)%len(fuzzRoutes)]
		p := strings.NewReplacer(
			"{name}", url.PathEscape(name), "{group}", url.PathEscape(name),
			"{id}", url.PathEscape(id), "{claim}", url.PathEscape(id), "{lease}", url.PathEscape(id),
		).Replace(r.path)
		s.roundTrip(t, r.method, p, rawQuery, body)
	})
}

// The harness's own rewrite keeps every other byte of the query.
func TestCapWait(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"wait=1s":                  "wait=50ms",
		"wait=10ms":                "wait=10ms",
		"w%61it=1h&owner=a":        "w%61it=50ms&owner=a",
		"wait=1%68":                "wait=50ms",
		"wait=soon&wait=2m":        "wait=soon&wait=50ms",
		"ttl=1h&wait=-1s":          "ttl=1h&wait=-1s",
		"wait=1s;x=1":              "wait=1s;x=1",
		"a=%zz&wait=5m&&=&wait":    "a=%zz&wait=50ms&&=&wait",
		"wait=9223372036854775807": "wait=9223372036854775807",
	} {
		if got := capWait(in); got != want {
			t.Errorf("capWait(%q) = %q, want %q", in, got, want)
		}
	}
}
