package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-chi/chi/v5"
)

// A client that misspells a parameter (ttl as tll, wait as wiat) must not get
// the default it did not ask for: a query parameter the operation does not
// declare in openapi.yaml, or a JSON body field its schema does not declare, is
// refused with 400 unknown-parameter, naming it ("parameter") and, when one is
// close, the declared name it may have meant ("didYouMean"). Both checks run
// before the handler, so nothing reaches ZooKeeper, and both are driven by the
// embedded spec: a parameter added to openapi.yaml is accepted without code here.
//
// The query check is a middleware of the base router (checkQuery): it finds the
// route itself, so it runs before the generated code binds the parameters (a
// misspelt required one is reported as unknown, not as missing) and before a
// long-poll takes its slot. The body check is part of bodyRule.check (bodies.go).

// queryRules maps "METHOD /path/{template}" (chi's route pattern) to the sorted
// query parameter names the operation declares, for every operation the
// generated router serves (the raw ones, tagged "raw", are served outside it).
func queryRules(spec *openapi3.T) map[string][]string {
	rules := map[string][]string{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if slices.Contains(op.Tags, "raw") {
				continue
			}
			names := []string{}
			for _, params := range []openapi3.Parameters{item.Parameters, op.Parameters} {
				for _, p := range params {
					if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
						names = append(names, p.Value.Name)
					}
				}
			}
			sort.Strings(names)
			rules[method+" "+path] = slices.Compact(names)
		}
	}
	return rules
}

// checkQuery refuses a query that does not parse (a pair with a semicolon or a
// bad escape, which the binder would silently drop) with 400 invalid-parameter,
// and a parameter the matched operation does not declare with 400
// unknown-parameter. A request that matches no generated route goes on to its
// 404, 405 or raw handler unchecked.
func (s *Server) checkQuery(mux *chi.Mux) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.RawQuery == "" {
				next.ServeHTTP(w, r)
				return
			}
			path := r.URL.RawPath // as chi routes
			if path == "" {
				path = r.URL.Path
			}
			pattern := mux.Find(chi.NewRouteContext(), r.Method, path)
			known, ok := s.queries[r.Method+" "+pattern]
			if !ok {
				next.ServeHTTP(w, r)
				return
			}
			if err := checkQueryNames(r.URL.RawQuery, known); err != nil {
				if rc := chi.RouteContext(r.Context()); rc != nil {
					rc.RoutePatterns = []string{pattern} // the metrics count it under its route, not as unmatched
				}
				s.writeProblem(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// checkQueryNames checks a raw query against the declared names, as
// url.ParseQuery splits it (a pair with ";" or a bad escape is refused, an
// empty pair skipped), without building its map: it runs on every request
// that has a query. Of several unknown names, the first in name order is named.
func checkQueryNames(raw string, known []string) error {
	var unknown string
	found := false
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return badQuery("invalid semicolon separator in query")
		}
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				return badQuery(err.Error())
			}
		}
		if strings.Contains(v, "%") {
			if _, err := url.QueryUnescape(v); err != nil {
				return badQuery(err.Error())
			}
		}
		if !slices.Contains(known, k) && (!found || k < unknown) {
			unknown, found = k, true
		}
	}
	if found {
		return unknownParameter("query", unknown, known)
	}
	return nil
}

// badQuery is the problem of a query that does not parse.
func badQuery(why string) error {
	return InvalidParameter("the query does not parse (%s): separate parameters with & and escape %% as %%25", why)
}

// unknownField finds the first (in name order) member of an object in v that
// its schema does not declare, walking into declared members, array items and
// allOf parts; at is the JSON pointer of v ("" at the top). A schema that
// allows additional properties, or whose members depend on a oneOf or anyOf,
// lets any member through. It returns the pointer of the unknown member and the
// names declared beside it, or "" when every member is declared.
func unknownField(s *openapi3.Schema, v any, at string) (string, []string) {
	if s == nil {
		return "", nil
	}
	switch v := v.(type) {
	case []any:
		if s.Items == nil {
			return "", nil
		}
		for i, e := range v {
			if f, known := unknownField(s.Items.Value, e, fmt.Sprintf("%s/%d", at, i)); f != "" {
				return f, known
			}
		}
	case map[string]any:
		props, open := declared(s)
		open = open || len(props) == 0 && s.AdditionalProperties.Has == nil // a schema of any object
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p, ok := props[k]
			if !ok {
				if open {
					continue
				}
				names := make([]string, 0, len(props))
				for n := range props {
					names = append(names, n)
				}
				sort.Strings(names)
				return strings.TrimPrefix(at+"/"+k, "/"), names
			}
			if f, known := unknownField(p, v[k], at+"/"+k); f != "" {
				return f, known
			}
		}
	}
	return "", nil
}

// declared gathers an object schema's properties, its allOf parts' included;
// open is whether it lets other members through.
func declared(s *openapi3.Schema) (props map[string]*openapi3.Schema, open bool) {
	props = map[string]*openapi3.Schema{}
	ap := s.AdditionalProperties
	open = (ap.Has != nil && *ap.Has) || ap.Schema != nil || len(s.OneOf) > 0 || len(s.AnyOf) > 0
	for n, p := range s.Properties {
		if p != nil {
			props[n] = p.Value
		}
	}
	for _, part := range s.AllOf {
		if part == nil || part.Value == nil {
			continue
		}
		pp, o := declared(part.Value)
		open = open || o
		for n, p := range pp {
			props[n] = p
		}
	}
	return props, open
}

// unknownParameter is the 400 unknown-parameter problem for name, a query
// parameter (in "query") or a body member (in the name of the body's schema)
// that is none of known.
func unknownParameter(in, name string, known []string) *Problem {
	ext := map[string]any{"parameter": name}
	hint := ""
	last := name[strings.LastIndex(name, "/")+1:]
	if near := nearest(last, known); near != "" {
		ext["didYouMean"] = strings.TrimSuffix(name, last) + near
		hint = fmt.Sprintf(" (did you mean %q?)", ext["didYouMean"])
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

// nearest is the known name closest to name, or "" when none is close: at
// most two edits away (insertions, deletions, substitutions, transpositions of
// neighbours, case ignored) and at most a third of the known name's length (at
// least one edit), so that "tll" finds "ttl" but "x" does not find "id". The
// first in known's order wins a tie.
func nearest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		limit := max(1, min(2, len(k)/3))
		if d := editDistance(strings.ToLower(name), strings.ToLower(k)); d <= limit && d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b (bytes):
// the Levenshtein distance with transpositions of neighbours as one edit.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
