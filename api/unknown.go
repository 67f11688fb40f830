package api

import (
	"fmt"
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
// and a parameter the matched operation does not declare with 400
// unknown-parameter. A route the spec does not describe goes on unchecked.
//
// It reports whether the request goes on (false: answered).
func (s *Server) checkQuery(w http.ResponseWriter, r *http.Request) bool {
	if r.URL.RawQuery == "" {
		return true
	}
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return true
	}
	known, ok := s.rules.Query(r.Method, rc.RoutePattern())
	if !ok {
		return true
	}
	if err := specrules.CheckQuery(r.URL.RawQuery, known); err != nil {
		s.writeProblem(w, r, err)
		return false
	}
	return true
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
		fmt.Sprintf("unknown %s %q%s; %s: %s. Nothing was done", what, name, hint, where, declared))
	p.Ext = ext
	return p
}
