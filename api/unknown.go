package api

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/coord-sidecar/coord-sidecar/api/specrules"
)

// A query parameter the operation does not declare in openapi.yaml, or a JSON
// body field its schema does not declare, is refused with 400
// unknown-parameter, naming it ("parameter") and, when one is close, the
// declared name it may have meant ("didYouMean"); the rules are package
// specrules'.
//
// The query check is a step of every route (checkQuery, run by routed once
// the router has matched the route): it runs before the generated code
// binds the parameters (a misspelt required one is reported as unknown, not
// as missing) and before a long-poll takes its slot. The body check is
// checkJSONBody's (bodies.go).

// checkQuery refuses a query that does not parse (a pair with a semicolon or a
// bad escape, which the binder would silently drop) with 400 invalid-parameter,
// a parameter the matched operation does not declare with 400
// unknown-parameter, and a declared one that is empty, given twice or not of
// its schema (specrules.CheckQuery) with 400 invalid-parameter naming it; then
// a body sent to an operation that declares none with 400 invalid-body. A
// route the spec does not describe goes on unchecked.
//
// It reports whether the request goes on (false: answered).
func (s *Server) checkQuery(w http.ResponseWriter, r *http.Request) bool {
	body := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
	if r.URL.RawQuery == "" && !body {
		return true
	}
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return true
	}
	return s.checkQueryOf(w, r, rc.RoutePattern(), body)
}

// checkQueryOf is checkQuery for a request of route (a pattern of the
// router's table) that sends a query or a body (body).
func (s *Server) checkQueryOf(w http.ResponseWriter, r *http.Request, route string, body bool) bool {
	q, ok := s.rules.Query(r.Method, route)
	if !ok {
		return true
	}
	if r.URL.RawQuery != "" {
		if err := specrules.CheckQuery(r.URL.RawQuery, q); err != nil {
			s.writeProblem(w, r, err)
			return false
		}
	}
	if body && q.NoBody && bodySent(r) {
		if r.ContentLength > s.opt.MaxBody { // too large for any operation: the limit says more
			s.writeProblem(w, r, &http.MaxBytesError{Limit: s.opt.MaxBody})
		} else {
			s.writeProblem(w, r, InvalidBody("this operation takes no body: its parameters go in the query string (see GET /docs/)"))
		}
		return false
	}
	return true
}

// bodySent tells whether r, whose body may be empty or not (a length, or
// chunked), has one: a chunked body is read for its first byte.
func bodySent(r *http.Request) bool {
	if r.ContentLength > 0 {
		return true
	}
	var first [1]byte
	n, _ := io.ReadFull(r.Body, first[:])
	return n > 0
}

// unknownParameter is the 400 unknown-parameter problem of u: a query
// parameter or a body member the operation does not declare.
func unknownParameter(u *specrules.Unknown) *Problem {
	in, name, known := u.In, u.Name, u.Known
	ext := map[string]any{"parameter": name}
	hint := ""
	if near := u.DidYouMean(); near != "" {
		ext["didYouMean"] = near
		hint = fmt.Sprintf(" (did you mean %q?)", near)
	}
	declared := "none"
	if len(known) > 0 {
		declared = strings.Join(known, ", ")
	}
	what, where := "query parameter", "the operation's query parameters"
	if in != "query" {
		what, where = "body field", in+"'s fields there"
	}
	p := NewProblem(http.StatusBadRequest, "unknown-parameter",
		fmt.Sprintf("unknown %s %s%s; %s: %s. Nothing was done", what, specrules.Quote(name), hint, where, declared))
	p.Ext = ext
	return p
}
