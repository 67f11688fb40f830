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
	"errors"
	"fmt"
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
	queries map[route]Query
	bodies  map[route]Body
}

// route is an operation's method and path template: a key looked up without
// joining the two into a new string at every request.
type route struct{ method, pattern string }

// New reads the rules of spec.
func New(spec *openapi3.T) *Rules {
	return &Rules{queries: queryRules(spec), bodies: bodyRules(spec)}
}

// Query is what the route (method and chi's route pattern) declares of its
// query, and whether it takes a body; false for a route the generated router
// does not serve.
func (r *Rules) Query(method, pattern string) (Query, bool) {
	q, ok := r.queries[route{method, pattern}]
	return q, ok
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
// name. Param, when set, is the query parameter or the body member (a path
// below the top, "holder/owner") refused, as sent (Shorten'd).
type Refused struct {
	Why    Refusal
	Detail string
	Param  string
}

func (r *Refused) Error() string { return r.Detail }

func refused(why Refusal, format string, args ...any) *Refused {
	return &Refused{Why: why, Detail: fmt.Sprintf(format, args...)}
}

// refusedParam is a refusal naming the parameter or member param.
func refusedParam(why Refusal, param, format string, args ...any) *Refused {
	return &Refused{Why: why, Detail: fmt.Sprintf(format, args...), Param: Shorten(param)}
}

// badQuery is the refusal of a query that does not parse.
func badQuery(why string) error {
	return refused(BadQuery, "the query does not parse (%s): separate parameters with & and escape %% as %%25", why)
}

// queryRules maps each route (method and chi's route pattern) to what the
// operation declares of its query (every query parameter, with its schema)
// and whether it takes a body, for every operation the generated router
// serves (the raw ones, tagged "raw", are served outside it).
func queryRules(spec *openapi3.T) map[route]Query {
	rules := map[route]Query{}
	for path, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			if slices.Contains(op.Tags, "raw") {
				continue
			}
			var params []*openapi3.Parameter
			for _, ps := range []openapi3.Parameters{item.Parameters, op.Parameters} {
				for _, p := range ps {
					if p.Value != nil && p.Value.In == openapi3.ParameterInQuery {
						params = append(params, p.Value)
					}
				}
			}
			q := newQuery(params)
			q.NoBody = op.RequestBody == nil
			rules[route{method, path}] = q
		}
	}
	return rules
}

// CheckQuery checks a raw query against what the operation declares, as
// url.ParseQuery splits it (a pair with ";" or a bad escape is refused, an
// empty pair skipped), without building its map: it runs on every request
// that has a query. A name the operation does not declare is Unknown (of
// several, the first in name order); else the first declared parameter (in
// the query's order) that is empty, given twice, or whose value is not of its
// schema (Query.check) is Refused.
func CheckQuery(raw string, q Query) error {
	var unknown string
	found := false
	var bad error
	var seen uint64 // the declared parameters met, by index (at most 64 are checked for repeats)
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
		if strings.ContainsAny(v, "%+") {
			var err error
			if v, err = url.QueryUnescape(v); err != nil {
				return badQuery(err.Error())
			}
		}
		i := q.index(k)
		if i < 0 {
			if !found || k < unknown {
				unknown, found = k, true
			}
			continue
		}
		if bad != nil {
			continue
		}
		if i < 64 {
			if seen&(1<<i) != 0 {
				bad = refusedParam(BadQuery, k, "%s is given twice: give each parameter once", k)
				continue
			}
			seen |= 1 << i
		}
		bad = q.params[i].check(v)
	}
	if found {
		return &Unknown{In: "query", Name: unknown, Known: q.Names}
	}
	return bad
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
	v, err := decodeStrict(body)
	if err != nil {
		return err
	}
	if field, known := unknownField(b.schema, v, ""); field != "" {
		return &Unknown{In: b.name, Name: field, Known: known}
	}
	if err := checkTypes(b.schema, v, ""); err != nil {
		err.Detail = "the body does not match " + b.name + ": " + err.Detail
		return err
	}
	if err := b.schema.VisitJSON(v, openapi3.VisitAsRequest()); err != nil {
		return schemaRefusal(b.name, err)
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
	sent := "none"
	if contentType != "" {
		sent = Quote(contentType)
	}
	return refused(BadMediaType, "a JSON body needs Content-Type: application/json (this request's: %s)", sent)
}

// schemaRefusal says where and why a value failed its schema, in one line,
// with the value sent.
func schemaRefusal(name string, err error) *Refused {
	var me openapi3.MultiError
	if errors.As(err, &me) && len(me) > 0 {
		err = me[0]
	}
	var se *openapi3.SchemaError
	if !errors.As(err, &se) {
		return refused(BadBody, "the body does not match %s", name)
	}
	reason := se.Reason
	if reason == "" {
		reason = "does not match " + se.SchemaField
	}
	p := se.JSONPointer()
	if len(p) == 0 {
		return refused(BadBody, "the body does not match %s: %s", name, reason)
	}
	at := strings.Join(p, "/")
	return refusedParam(BadBody, at, "the body does not match %s: %s is %s: %s", name, Quote(at), shown(se.Value), reason)
}
