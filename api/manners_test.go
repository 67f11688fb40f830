package api_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	coordsidecar "github.com/coord-sidecar/coord-sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// HTTP manners (issue 39, item 3): every 405 carries Allow, HEAD works
// wherever GET does (event streams aside), and the two pages are sent
// compressed to a client that asks.

// route is one path the router serves and the methods it takes there.
type route struct {
	path    string // as sent: the spec's template with its parameters filled
	methods []string
	pattern *regexp.Regexp // the paths the spec's template matches (nil: a route beside the spec)
}

// specParam is a path parameter of openapi.yaml.
var specParam = regexp.MustCompile(`\{[^}]+\}`)

// routes are the generated spec's paths with their methods, plus the routes
// served beside the spec (the pages' redirects, the status page's ticket and
// icon).
func routes(t *testing.T) []route {
	t.Helper()
	spec, err := openapi3.NewLoader().LoadFromData(coordsidecar.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	var out []route
	for _, p := range spec.Paths.InMatchingOrder() {
		var methods []string
		for m := range spec.Paths.Value(p).Operations() {
			methods = append(methods, m)
		}
		out = append(out, route{specParam.ReplaceAllString(p, "p1"), methods,
			regexp.MustCompile("^" + strings.ReplaceAll(regexp.QuoteMeta(specParam.ReplaceAllString(p, "\x00")), "\x00", "[^/]+") + "$")})
	}
	if len(out) < 50 {
		t.Fatalf("openapi.yaml has %d paths: the test does not read it right", len(out))
	}
	return append(out, route{"/ui", []string{"GET"}, nil}, route{"/docs", []string{"GET"}, nil},
		route{"/favicon.ico", []string{"GET"}, nil}, route{"/ui/ticket", []string{"POST"}, nil})
}

// allowed is what Allow must list for rt: its methods, and HEAD with GET but
// on an event stream.
func (rt route) allowed() []string {
	out := slices.Clone(rt.methods)
	if slices.Contains(out, "GET") && !isStream(rt.path) && !slices.Contains(out, "HEAD") {
		out = append(out, "HEAD")
	}
	slices.Sort(out)
	return out
}

// allowedAmong is allowed, plus the methods of the other routes whose
// pattern the path also matches: /v1/kv/events is the prefix stream for GET
// and the key "events" for PUT and DELETE (/v1/kv/{key}).
func (rt route) allowedAmong(all []route) []string {
	out := rt.allowed()
	for _, o := range all {
		if o.pattern == nil || o.path == rt.path || !o.pattern.MatchString(rt.path) {
			continue
		}
		for _, m := range o.methods {
			if m != "GET" && !slices.Contains(out, m) {
				out = append(out, m)
			}
		}
	}
	slices.Sort(out)
	return out
}

func isStream(path string) bool { return strings.HasSuffix(path, "/events") }

// Every route answers a method it does not take with 405 and an Allow that
// lists the methods it does (from the router: the table is the spec's).
func TestMethodNotAllowedSaysAllow(t *testing.T) {
	t.Parallel()
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	all := routes(t)
	for _, rt := range all {
		want := rt.allowedAmong(all)
		var other string
		for _, m := range []string{"PATCH", "PUT", "DELETE", "POST", "GET"} {
			if !slices.Contains(want, m) {
				other = m
				break
			}
		}
		r, err := car.Do(context.Background(), other, rt.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d, want 405: %s", other, rt.path, r.Status, r.Raw)
			continue
		}
		var got []string
		for _, m := range strings.Split(r.Header.Get("Allow"), ",") {
			if m = strings.TrimSpace(m); m != "" {
				got = append(got, m)
			}
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s %s: 405 with Allow %q, want %q", other, rt.path, r.Header.Get("Allow"), strings.Join(want, ", "))
		}
	}
}

// HEAD answers as GET does, without the body, on every route that takes GET
// but the event streams; among them /healthz and the two pages.
func TestHeadWhereverGet(t *testing.T) {
	t.Parallel()
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	n := 0
	for _, rt := range routes(t) {
		if !slices.Contains(rt.methods, "GET") || isStream(rt.path) {
			continue
		}
		get := headOrGet(t, car, "GET", rt.path)
		head := headOrGet(t, car, "HEAD", rt.path)
		if head.StatusCode != get.StatusCode || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q, GET: %d %q", rt.path, head.StatusCode, head.Header.Get("Content-Type"),
				get.StatusCode, get.Header.Get("Content-Type"))
		}
		n++
	}
	for _, p := range []string{"/healthz", "/docs/", "/ui/"} {
		if r := headOrGet(t, car, "HEAD", p); r.StatusCode != http.StatusOK {
			t.Errorf("HEAD %s: %d, want 200", p, r.StatusCode)
		}
	}
	if n < 30 {
		t.Fatalf("only %d routes with GET", n)
	}
}

// headOrGet sends method to path and returns the answer, its body read.
func headOrGet(t *testing.T, car *sidecartest.Sidecar, method, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, car.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := car.HC().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if method == "HEAD" && len(b) > 0 {
		t.Errorf("HEAD %s: a body of %d bytes", path, len(b))
	}
	return resp
}

// /docs/ and /ui/ are gzip-compressed for a client that accepts it (the
// reference well under 1 MB on the wire), and sent as they are to one that
// does not; either way the page is the same.
func TestPagesCompressed(t *testing.T) {
	t.Parallel()
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	// A transport that leaves the encoding alone, so the test sees the wire.
	hc := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	for _, c := range []struct {
		path  string
		limit int
	}{{"/docs/", 1 << 20}, {"/ui/", 1 << 20}} {
		plain := fetch(t, hc, car.Base+c.path, "")
		zipped := fetch(t, hc, car.Base+c.path, "br;q=1.0, gzip;q=0.8, *;q=0.1")
		if enc := plain.Header.Get("Content-Encoding"); enc != "" {
			t.Errorf("GET %s without Accept-Encoding: Content-Encoding %q", c.path, enc)
		}
		if enc := zipped.Header.Get("Content-Encoding"); enc != "gzip" {
			t.Fatalf("GET %s accepting gzip: Content-Encoding %q", c.path, enc)
		}
		for _, r := range []*fetched{plain, zipped} {
			if !strings.Contains(r.Header.Get("Vary"), "Accept-Encoding") {
				t.Errorf("GET %s: Vary %q, want Accept-Encoding", c.path, r.Header.Get("Vary"))
			}
		}
		zr, err := gzip.NewReader(bytes.NewReader(zipped.body))
		if err != nil {
			t.Fatal(err)
		}
		unzipped, err := io.ReadAll(zr)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(unzipped, plain.body) {
			t.Errorf("GET %s: the gzip body is not the page", c.path)
		}
		if len(zipped.body) >= c.limit {
			t.Errorf("GET %s: %d bytes on the wire, want under %d", c.path, len(zipped.body), c.limit)
		}
		if got := fetch(t, hc, car.Base+c.path, "gzip;q=0"); got.Header.Get("Content-Encoding") != "" {
			t.Errorf("GET %s with gzip;q=0: Content-Encoding %q", c.path, got.Header.Get("Content-Encoding"))
		}
		t.Logf("%s: %d bytes, %d gzipped", c.path, len(plain.body), len(zipped.body))
	}
}

type fetched struct {
	Header http.Header
	body   []byte
}

func fetch(t *testing.T, hc *http.Client, url, acceptEncoding string) *fetched {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if acceptEncoding != "" {
		req.Header.Set("Accept-Encoding", acceptEncoding)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return &fetched{resp.Header, b}
}
