package api

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Names with "/" in paths (Descriptor.NestedNames): a key config/app/db is
// sent as /v1/kv/config/app/db, while the routes, generated from
// openapi.yaml, take a name as one {key} segment. nestName escapes the
// name's slashes in the path the router matches (URL.RawPath), so the route's
// segment takes the whole name and the generated code unescapes it; the path
// itself (URL.Path, the request line's) stays as sent.

// nestName rewrites r's escaped path when it names a thing of a nested kind
// with more than one segment.
func (s *Server) nestName(r *http.Request) {
	if len(s.nested) == 0 {
		return
	}
	kind, segs, split := s.nestedSegments(r)
	if split == nil {
		return
	}
	n := split(r.Method, segs)
	if n < 2 || n > len(segs) {
		return
	}
	raw := "/v1/" + kind + "/" + strings.Join(segs[:n], "%2F")
	if n < len(segs) {
		raw += "/" + strings.Join(segs[n:], "/")
	}
	r.URL.RawPath = raw
}

// nestedSegments are the escaped segments after /v1/<kind>/ of a request on a
// nested kind, with the kind's split; split nil for any other request.
func (s *Server) nestedSegments(r *http.Request) (string, []string, func(string, []string) int) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/")
	if !ok {
		return "", nil, nil
	}
	kind, rest, ok := strings.Cut(rest, "/")
	split := s.nested[kind]
	if !ok || split == nil || rest == "" {
		return "", nil, nil
	}
	return kind, strings.Split(rest, "/"), split
}

// pathName is the token kind and the name a request's path names, as the
// route will see it (its escapes undone), when the path names one: ok false
// for a path outside the token kinds, a kind's list, and a route of a nested
// kind's own that names nothing.
func (s *Server) pathName(r *http.Request) (kind, name string, ok bool) {
	rest, found := strings.CutPrefix(r.URL.EscapedPath(), "/v1/")
	if !found {
		return "", "", false
	}
	kind, rest, _ = strings.Cut(rest, "/")
	if !slices.Contains(s.tokenKinds, kind) || rest == "" {
		return "", "", false
	}
	if split := s.nested[kind]; split != nil && split(r.Method, strings.Split(rest, "/")) == 0 {
		return "", "", false
	}
	seg, _, _ := strings.Cut(rest, "/")
	if name, err := url.PathUnescape(seg); err == nil {
		return kind, name, true
	}
	return kind, seg, true
}
