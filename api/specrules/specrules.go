// Package specrules holds requests to what openapi.yaml declares of them,
// before any handler runs (so nothing reaches ZooKeeper), from the embedded
// spec itself: a parameter or a body added to openapi.yaml is checked without
// code here.
//
// A client that misspells a parameter (ttl as tll, wait as wiat) must not get
// the default it did not ask for: a query parameter the operation does not
// declare, or a JSON body member its schema does not declare, is Unknown,
// with the declared name it may have meant (Nearest). A JSON body is also held
// to its schema: the generated decoder takes any Content-Type, ignores what
// follows the first JSON value, and turns a missing required field into its
// zero value. The errors here say what is wrong; api turns them into problem
// documents (400 unknown-parameter, invalid-parameter, invalid-body, 415
// unsupported-media-type).
package specrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// Rules are what the spec declares of each operation's query and JSON body,
// by route: its method and path template (chi's route pattern).
type Rules struct {
	queries map[route][]string
	bodies  map[route]Body
}

// route is an operation's method and path template: a key looked up without
// joining the two into a new string at every request.
type route struct{ method, pattern string }

// New reads the rules of spec.
func New(spec *openapi3.T) *Rules {
	return &Rules{queries: queryRules(spec), bodies: bodyRules(spec)}
}

// Query is the sorted query parameter names the route (method and chi's
// route pattern) declares; false for a route the generated router does not
// serve.
func (r *Rules) Query(method, pattern string) ([]string, bool) {
	known, ok := r.queries[route{method, pattern}]
	return known, ok
}

// Body is the route's JSON body rule; false when it takes no JSON body.
func (r *Rules) Body(method, pattern string) (Body, bool) {
	b, ok := r.bodies[route{method, pattern}]
	return b, ok
}

// Unknown is a query parameter (In "query") or a JSON body member (In the
// name of the body's schema; Name its path there, "holder/owner") that the
// operation does not declare; Known are the names declared beside it.
type Unknown struct {
	In, Name string
	Known    []string
}

func (u *Unknown) Error() string { return fmt.Sprintf("unknown parameter %q in %s", u.Name, u.In) }

// DidYouMean is the declared name the client most likely meant (with Name's
// path before it), or "" when none is close.
func (u *Unknown) DidYouMean() string {
	last := u.Name[strings.LastIndex(u.Name, "/")+1:]
	if near := Nearest(last, u.Known); near != "" {
		return strings.TrimSuffix(u.Name, last) + near
	}
	return ""
}

// Refusal is why a request was Refused.
type Refusal int

const (
	// BadQuery: the query does not parse (a pair with ";", a bad escape).
	BadQuery Refusal = iota
	// BadBody: the body is not one JSON value matching its schema, or a
	// required body is absent.
	BadBody
	// BadMediaType: a JSON body sent as another Content-Type.
	BadMediaType
)

// Refused is a request the spec refuses for another reason than an unknown
// name.
type Refused struct {
	Why    Refusal
	Detail string
}

func (r *Refused) Error() string { return r.Detail }

func refused(why Refusal, format string, args ...any) *Refused {
	return &Refused{Why: why, Detail: fmt.Sprintf(format, args...)}
}

// badQuery is the refusal of a query that does not parse.
func badQuery(why string) error {
	return refused(BadQuery, "the query does not parse (%s): separate parameters with & and escape %% as %%25", why)
}

// queryRules maps each route (method and chi's route pattern) to the sorted
// query parameter names the operation declares, for every operation the
// generated router serves (the raw ones, tagged "raw", are served outside it).
func queryRules(spec *openapi3.T) map[route][]string {
	rules := map[route][]string{}
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
			rules[route{method, path}] = slices.Compact(names)
		}
	}
	return rules
}

// CheckQuery checks a raw query against the declared names, as
// url.ParseQuery splits it (a pair with ";" or a bad escape is refused, an
// empty pair skipped), without building its map: it runs on every request
// that has a query. Of several unknown names, the first in name order is named.
func CheckQuery(raw string, known []string) error {
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
		return &Unknown{In: "query", Name: unknown, Known: known}
	}
	return nil
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

// Nearest is the known name closest to name, or "" when none is close: at
// most two edits away (insertions, deletions, substitutions, transpositions of
// neighbours, case ignored) and at most a third of the known name's length (at
// least one edit), so that "tll" finds "ttl" but "x" does not find "id". The
// first in known's order wins a tie.
func Nearest(name string, known []string) string {
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

// Body is what the spec says of one operation's JSON request body.
type Body struct {
	required bool
	schema   *openapi3.Schema
	name     string // the schema's component name, for messages
}

// bodyRules maps each route (method and chi's route pattern) to its rule; only
// operations with an application/json request body have one.
func bodyRules(spec *openapi3.T) map[route]Body {
	rules := map[route]Body{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if op.RequestBody == nil || op.RequestBody.Value == nil {
				continue
			}
			mt := op.RequestBody.Value.Content["application/json"] // exactly: Get would match */* too
			if mt == nil || mt.Schema == nil || mt.Schema.Value == nil {
				continue
			}
			name := "its schema"
			if ref := mt.Schema.Ref; ref != "" {
				name = ref[strings.LastIndex(ref, "/")+1:]
			}
			rules[route{method, path}] = Body{required: op.RequestBody.Value.Required, schema: mt.Schema.Value, name: name}
		}
	}
	return rules
}

// Check applies the rule to a body and its Content-Type.
func (b Body) Check(contentType string, body []byte) error {
	if len(body) == 0 {
		if b.required {
			return refused(BadBody, "the request needs a JSON body (%s)", b.name)
		}
		return nil // an optional body left out: no Content-Type needed either
	}
	if err := jsonContentType(contentType); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return refused(BadBody, "the body is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return refused(BadBody, "the body has more data after its JSON value; send exactly one value")
	}
	if field, known := unknownField(b.schema, v, ""); field != "" {
		return &Unknown{In: b.name, Name: field, Known: known}
	}
	if err := b.schema.VisitJSON(v, openapi3.VisitAsRequest()); err != nil {
		return refused(BadBody, "the body does not match %s: %s", b.name, schemaReason(err))
	}
	return nil
}

// jsonContentType accepts application/json, with no charset or utf-8.
func jsonContentType(contentType string) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	shown := contentType
	if shown == "" {
		shown = "none"
	}
	return refused(BadMediaType, "a JSON body needs Content-Type: application/json (this request's: %s)", shown)
}

// schemaReason says where and why a value failed its schema, in one line.
func schemaReason(err error) string {
	var me openapi3.MultiError
	if errors.As(err, &me) && len(me) > 0 {
		err = me[0]
	}
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		return err.Error()
	}
	at := "the body"
	if p := se.JSONPointer(); len(p) > 0 {
		at = `"` + strings.Join(p, "/") + `"`
	}
	reason := se.Reason
	if reason == "" {
		reason = "does not match " + se.SchemaField
	}
	return at + ": " + reason
}
