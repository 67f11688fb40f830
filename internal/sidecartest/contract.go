package sidecartest

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// EventKey names an event by its name and the name of its entity: "lock/l",
// "leader/e", "throughput/g".
func EventKey(ev Event) string {
	return ev.Name + "/" + cmp.Or(Str(ev.Data["name"]), Str(ev.Data["group"]))
}

// CheckEvent fails t unless ev, an event of the stream at path, matches the
// schema openapi.yaml gives it (MatchesSchema).
func CheckEvent(t *testing.T, spec *openapi3.T, path string, ev Event) {
	t.Helper()
	schema := StreamEventSchema(spec, path)
	if schema == nil {
		t.Fatalf("no event schema for %s in openapi.yaml", path)
	}
	v := map[string]any{"id": ev.ID, "event": ev.Name, "data": ev.Data}
	if err := MatchesSchema(schema, v); err != nil {
		raw, _ := json.Marshal(v)
		t.Fatalf("%s: event %s does not match its schema: %v", path, raw, err)
	}
}

// EmptyStatesSession are the flags of the sidecar MakeEmptyStates works on: a
// session that outlives a busy moment (Prism starting, the suite beside it),
// since a lost session would take the read/write lock's reader with it.
var EmptyStatesSession = []string{"--session-timeout", "10s"}

// MakeEmptyStates leaves on car, under the names TestEmptyStatesMatchTheirSchemas
// and TestPrismAcceptsEmptyStates read, a free lock (l) and an election nobody
// Leads (e) that were held once, a read/write lock with a reader and no writer
// (rw), a throughput group (g), a membership group (gr) and a partition group of
// two partitions (p), all without members. It returns the answer to the
// partition group's PUT.
func MakeEmptyStates(t *testing.T, car *Sidecar) *Response {
	t.Helper()
	lease := Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/l?lease="+lease)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/l?lease="+lease)
	Campaign(t, car, "e", "c1", "lease="+lease)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/e/candidates/c1?lease="+lease)
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/rw?mode=read&lease="+lease)
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/g", `{"limit":10}`)
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/groups/gr/members?id=m1&lease="+lease)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/groups/gr/members/m1?lease="+lease)
	return car.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/p", `{"count":2}`)
}

// StreamEventSchema is the schema openapi.yaml gives one event of the stream at
// path (the items of its text/event-stream answer), or nil.
func StreamEventSchema(spec *openapi3.T, path string) *openapi3.Schema {
	resp := AnswerOf(spec, http.MethodGet, path, http.StatusOK)
	if resp == nil {
		return nil
	}
	if mt := resp.Content["text/event-stream"]; mt != nil && mt.Schema != nil && mt.Schema.Value.Items != nil {
		return mt.Schema.Value.Items.Value
	}
	return nil
}

// AnswerOf is the Response openapi.yaml declares for method on path (a path as
// sent, matched against the templates, concrete ones first: /v1/kv/events
// is its own path for GET, and /v1/kv/{key} for PUT) with status, or nil.
func AnswerOf(spec *openapi3.T, method, path string, status int) *openapi3.Response {
	for _, tmpl := range spec.Paths.InMatchingOrder() {
		item := spec.Paths.Value(tmpl)
		re := "^" + regexp.MustCompile(`\\\{[^}]+\\\}`).ReplaceAllString(regexp.QuoteMeta(tmpl), `[^/]+`) + "$"
		if !regexp.MustCompile(re).MatchString(path) {
			continue
		}
		if op := item.GetOperation(method); op != nil {
			if resp := op.Responses.Status(status); resp != nil {
				return resp.Value
			}
		}
	}
	return nil
}

// CheckContractAnswer fails t unless r, the answer to method on path, is JSON that
// matches the schema openapi.yaml gives it (MatchesSchema).
func CheckContractAnswer(t *testing.T, spec *openapi3.T, method, path string, r *Response) {
	t.Helper()
	resp := AnswerOf(spec, method, strings.SplitN(path, "?", 2)[0], r.Status)
	if resp == nil {
		t.Fatalf("%s %s: openapi.yaml declares no %d answer", method, path, r.Status)
	}
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	mt := resp.Content[ct]
	if mt == nil || mt.Schema == nil {
		t.Fatalf("%s %s: openapi.yaml declares no %s body for %d", method, path, ct, r.Status)
	}
	var body any
	if err := json.Unmarshal(r.Raw, &body); err != nil {
		t.Fatalf("%s %s: not JSON: %s", method, path, r.Raw)
	}
	if err := MatchesSchema(mt.Schema.Value, body); err != nil {
		t.Fatalf("%s %s: the answer %s does not match its schema: %v", method, path, r.Raw, err)
	}
}

// MatchesSchema checks v, a decoded JSON value, against schema as kin-openapi
// does, then as OpenAPI 3.0.3 reads `nullable`: it lets null through only where
// `type` stands in the same schema object, so a null must also pass every
// allOf member, exactly one oneOf member and some anyOf member. kin-openapi lets
// a null through wherever the outer schema says nullable (`nullable: true`
// beside `allOf: [$ref]`); Prism's validating proxy and strict clients refuse
// it, as the standard does.
func MatchesSchema(schema *openapi3.Schema, v any) error {
	if err := schema.VisitJSON(v); err != nil {
		return err
	}
	return StrictNulls(schema, v, "")
}

// StrictNulls finds, in v, a null that schema lets through only by
// kin-openapi's reading of nullable (see MatchesSchema); at is v's place.
func StrictNulls(schema *openapi3.Schema, v any, at string) error {
	if v == nil {
		if !AdmitsNull(schema) {
			return fmt.Errorf("%s is null, which its schema refuses under OpenAPI 3.0.3 (nullable counts only beside type, and every allOf member must allow null too)", cmp.Or(at, "the value"))
		}
		return nil
	}
	for _, sub := range schema.AllOf {
		if err := StrictNulls(sub.Value, v, at); err != nil {
			return err
		}
	}
	for _, alternatives := range [][]*openapi3.SchemaRef{schema.OneOf, schema.AnyOf} {
		if err := StrictNullsInOneOf(alternatives, v, at); err != nil {
			return err
		}
	}
	return StrictNullsBelow(schema, v, at)
}

// StrictNullsInOneOf is StrictNulls for the alternatives (oneOf, anyOf) that v
// matches: it passes when one of them passes.
func StrictNullsInOneOf(alternatives []*openapi3.SchemaRef, v any, at string) error {
	var first error
	for _, alt := range alternatives {
		if alt.Value.VisitJSON(v) != nil {
			continue // not an alternative v is one of
		}
		err := StrictNulls(alt.Value, v, at)
		if err == nil {
			return nil
		}
		first = cmp.Or(first, err)
	}
	return first
}

// AdmitsNull tells whether schema lets null through under OpenAPI 3.0.3.
func AdmitsNull(schema *openapi3.Schema) bool {
	if t := schema.Type; t != nil && len(*t) > 0 && !schema.Nullable && !t.IncludesNull() {
		return false
	}
	if schema.Not != nil && AdmitsNull(schema.Not.Value) {
		return false
	}
	for _, sub := range schema.AllOf {
		if !AdmitsNull(sub.Value) {
			return false
		}
	}
	if len(schema.AnyOf) > 0 && !slices.ContainsFunc(schema.AnyOf, func(s *openapi3.SchemaRef) bool { return AdmitsNull(s.Value) }) {
		return false
	}
	n := 0
	for _, sub := range schema.OneOf {
		if AdmitsNull(sub.Value) {
			n++
		}
	}
	return len(schema.OneOf) == 0 || n == 1
}

// StrictNullsBelow is StrictNulls for the members of an object and the items
// of an array.
func StrictNullsBelow(schema *openapi3.Schema, v any, at string) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			sub := cmp.Or(schema.Properties[k], schema.AdditionalProperties.Schema)
			if sub == nil {
				continue
			}
			if err := StrictNulls(sub.Value, v[k], at+"/"+k); err != nil {
				return err
			}
		}
	case []any:
		if schema.Items == nil {
			return nil
		}
		for i, x := range v {
			if err := StrictNulls(schema.Items.Value, x, fmt.Sprintf("%s/%d", at, i)); err != nil {
				return err
			}
		}
	}
	return nil
}
