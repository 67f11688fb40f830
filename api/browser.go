package api

import (
	"net"
	"net/http"
	"strings"
)

// Browser protections (docs/SECURITY.md): a web page the user visits
// can make the browser send requests to the sidecar (a cross-site form, a
// text/plain fetch, an <img>), or rebind its own host name to 127.0.0.1 (DNS
// rebinding) and then read the answers as same-origin. The Host allow-list stops
// the second, the Origin allow-list the first; CORS answers go to allowed origins
// only. Neither check needs a token, and both run before anything else.

// HostList is an allow-list of Host header values: "name" (any port),
// "name:port", "[v6]" or "[v6]:port", or "*" for every host. The empty list
// allows every host.
type HostList []string

// allows reports whether hostport (a Host header) is in the list.
func (l HostList) allows(hostport string) bool { return newHostMatcher(l).allows(hostport) }

// hostMatcher is a HostList with its entries split once (NewServer), not at
// every request.
type hostMatcher struct {
	empty   bool // allows every host
	star    bool // "*" is in it: every host a Host header names
	entries []hostPort
}

type hostPort struct{ host, port string }

func newHostMatcher(l HostList) hostMatcher {
	m := hostMatcher{empty: len(l) == 0}
	for _, e := range l {
		if e == "*" {
			m.star = true
		}
		h, p := splitHostPort(e)
		m.entries = append(m.entries, hostPort{h, p})
	}
	return m
}

// allows is HostList.allows.
func (m hostMatcher) allows(hostport string) bool {
	if m.empty {
		return true
	}
	host, port := splitHostPort(hostport)
	if host == "" {
		return false
	}
	if m.star {
		return true
	}
	for _, e := range m.entries {
		if strings.EqualFold(e.host, host) && (e.port == "" || e.port == port) {
			return true
		}
	}
	return false
}

// splitHostPort splits "host", "host:port", "[v6]" or "[v6]:port", lower-cased.
func splitHostPort(hp string) (host, port string) {
	hp = strings.ToLower(strings.TrimSpace(hp))
	if h, p, err := net.SplitHostPort(hp); err == nil {
		return h, p
	}
	return strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), ""
}

// DefaultAllowedHosts is the Host allow-list of a listener (docs/SECURITY.md): on a
// loopback address or a unix socket, the listen host, localhost, 127.0.0.1 and
// [::1] (with any port); on any other address, nil (every host).
func DefaultAllowedHosts(network, addr string) HostList {
	if network == "unix" {
		return HostList{"localhost", "127.0.0.1", "[::1]"}
	}
	host, _ := splitHostPort(addr)
	ip := net.ParseIP(host)
	if host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil
	}
	l := HostList{"localhost", "127.0.0.1", "[::1]"}
	if host != "localhost" && host != "127.0.0.1" && host != "::1" {
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		l = append(l, host)
	}
	return l
}

// sameOrigin reports whether origin is the sidecar's own as this request reached
// it: its scheme and its Host.
func sameOrigin(origin string, r *http.Request) bool {
	scheme := "http://"
	if r.TLS != nil {
		scheme = "https://"
	}
	return strings.EqualFold(origin, scheme+r.Host)
}

// originAllowed reports whether origin may send requests: the sidecar's own, or
// one of --allowed-origins.
func (s *Server) originAllowed(origin string, r *http.Request) (allowed, own bool) {
	if sameOrigin(origin, r) {
		return true, true
	}
	for _, o := range s.opt.AllowedOrigins {
		if strings.EqualFold(strings.TrimSuffix(o, "/"), origin) {
			return true, false
		}
	}
	return false, false
}

// exposedHeaders are the response headers a cross-origin script may read.
const exposedHeaders = "Item-Id, Claim-Id, Retry-After, Location, WWW-Authenticate"

// guardBrowser refuses, before anything else happens, a Host outside the
// allow-list (403 host-not-allowed) and an Origin other than the sidecar's own
// and --allowed-origins (403 origin-not-allowed); a request to /v1 that the
// browser marks as cross-site (Sec-Fetch-Site) without an Origin is refused too.
// It answers CORS preflights of allowed origins and adds CORS headers to their
// requests; other origins get no CORS header at all. /healthz and /readyz stay
// open to every Host (probes send the pod's address).
//
// It reports whether the request goes on (false: answered).
func (s *Server) guardBrowser(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		return true
	}
	if !s.hosts.allows(r.Host) {
		s.refuse(w, r, NewProblem(http.StatusForbidden, "host-not-allowed",
			"the Host "+quoteHeader(r.Host)+" is not among the sidecar's allowed hosts (--allowed-hosts)"))
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" && strings.HasPrefix(r.URL.Path, "/v1") {
			s.refuse(w, r, NewProblem(http.StatusForbidden, "origin-not-allowed",
				"a cross-site browser request is not allowed"))
			return false
		}
		return true
	}
	allowed, own := s.originAllowed(origin, r)
	if !allowed {
		s.refuse(w, r, NewProblem(http.StatusForbidden, "origin-not-allowed",
			"the Origin "+quoteHeader(origin)+" is not among the sidecar's allowed origins (--allowed-origins)"))
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	if !own {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", exposedHeaders)
	}
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, DELETE")
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, Last-Event-ID")
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}

// quoteHeader quotes a header value for a problem's detail, cut to 100 bytes.
func quoteHeader(v string) string {
	if len(v) > 100 {
		v = v[:100] + "…"
	}
	return `"` + strings.ReplaceAll(v, `"`, `\"`) + `"`
}

// storedBytesPolicy is the Content-Security-Policy of every /v1 answer: a
// document the browser makes of it is sandboxed (no script runs, no form is
// sent, no plugin loads, and it has an opaque origin: it is not the sidecar's
// origin, so it can neither call /v1 as such nor read an answer), may load
// nothing, and may not be framed.
const storedBytesPolicy = "sandbox; default-src 'none'; frame-ancestors 'none'"

// notAPage makes no /v1 answer a page of the sidecar's origin (OWASP's
// guidance for serving what users stored): it sends X-Content-Type-Options:
// nosniff (the browser takes the Content-Type as sent and never guesses
// another, so no answer is run as a script or style by another page) and
// storedBytesPolicy. Keys' values and queue items are answered with the
// Content-Type their writer chose (openapi.yaml: any content type), so without it a
// stored text/html or image/svg+xml value would run its scripts as the
// sidecar's origin when opened, and drive the API. It covers every /v1 answer,
// not only those three, so that no handler can forget it; API clients (curl,
// fetch, the status page's fetch and EventSource, every HTTP library) ignore
// both headers. Hijacked event streams write their own header
// (text/event-stream, which a browser does not render). openapi.yaml declares
// both headers on the three answers of stored bytes; the handlers leave the
// generated header fields nil, so what is set here is what is sent.
//
// Content-Disposition: attachment is not sent: the policy already keeps a
// rendered value from running anything or acting as the sidecar, API clients
// ignore it, and in a browser it would only turn a value or a JSON state that
// someone opens to read into a download.
func notAPage(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		h := w.Header()
		h["X-Content-Type-Options"] = nosniff[:1:1] // shared and never written in place: an Add copies (capacity 1)
		h["Content-Security-Policy"] = storedBytesPolicyValue[:1:1]
	}
}

// The header values notAPage sets, made once: each request's Header.Set would
// make a new one-element slice for each.
var (
	nosniff                = []string{"nosniff"}
	storedBytesPolicyValue = []string{storedBytesPolicy}
)
