package api

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"
)

// HTTP manners: HEAD wherever GET works, Allow on every 405 (both from the
// router's own table), and the pages compressed for a client that asks.

// routeMethods are the methods a route may take, in the order Allow lists
// them.
var routeMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// isEventStream tells whether path is an event stream's (SSE): HEAD is not
// served there (it would open the stream).
func isEventStream(path string) bool { return strings.HasSuffix(path, "/events") }

// routePath is the path mux routes r by.
func routePath(r *http.Request) string {
	if r.URL.RawPath != "" {
		return r.URL.RawPath
	}
	return r.URL.Path
}

// headAsGet serves a HEAD request to a route that takes GET, event streams
// aside, as that GET: every step (the query's check, the token's scope, the
// operation) sees a GET, and net/http sends the answer's status and headers
// without its body (it drops a HEAD's body itself). mux is the router the
// middleware runs in; the request's log line and metrics keep HEAD (they are
// taken from the request as it came in).
func headAsGet(mux *chi.Mux) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodHead && !isEventStream(r.URL.Path) {
				path := routePath(r)
				if !mux.Match(chi.NewRouteContext(), http.MethodHead, path) && mux.Match(chi.NewRouteContext(), http.MethodGet, path) {
					get := *r
					get.Method = http.MethodGet
					r = &get
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// allowOf is the Allow header of a 405 on r's path: the methods mux routes
// there, HEAD with GET but on an event stream (headAsGet).
func allowOf(mux *chi.Mux, r *http.Request) string {
	path := routePath(r)
	var allow []string
	for _, m := range routeMethods {
		ok := mux.Match(chi.NewRouteContext(), m, path)
		if m == http.MethodHead && !ok {
			ok = !isEventStream(r.URL.Path) && mux.Match(chi.NewRouteContext(), http.MethodGet, path)
		}
		if ok {
			allow = append(allow, m)
		}
	}
	return strings.Join(allow, ", ")
}

// page is a page served from the binary, and its gzip encoding, made at the
// first request that accepts it.
type page struct {
	plain []byte
	gz    func() []byte
}

func newPage(plain []byte) *page {
	return &page{plain: plain, gz: sync.OnceValue(func() []byte {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression) // a valid level: no error
		_, _ = zw.Write(plain)                                 // to a bytes.Buffer: no error
		_ = zw.Close()
		return b.Bytes()
	})}
}

// serve writes the page, gzip-encoded when r accepts gzip; the caller has
// set the other headers.
func (p *page) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Accept-Encoding")
	body := p.plain
	if acceptsGzip(r.Header.Values("Accept-Encoding")) {
		body = p.gz()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// acceptsGzip tells whether the Accept-Encoding values accept gzip: named
// (or "*") with a weight above 0, and not refused by name.
func acceptsGzip(values []string) bool {
	named, star := -1.0, -1.0
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(item), ";")
			q := 1.0
			for _, p := range strings.Split(params, ";") {
				if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(k, "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						q = f
					}
				}
			}
			switch strings.ToLower(strings.TrimSpace(coding)) {
			case "gzip", "x-gzip":
				named = q
			case "*":
				star = q
			}
		}
	}
	if named >= 0 {
		return named > 0
	}
	return star > 0
}
