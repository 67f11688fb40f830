package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
)

// typoBodies are a valid body of each JSON request body schema, for the
// misspelt-field cases, besides those whose schema in openapi.yaml has an
// object example (validBody); an operation with neither fails the test.
var typoBodies = map[string]map[string]any{
	"CandidateValue":         {"value": "v"},
	"MemberValue":            {"value": "v"},
	"ThroughputLimit":        {"limit": 10},
	"ThroughputMemberUpdate": {"weight": 2},
	"PartitionSet":           {"count": 3},
	"CounterValue":           {"value": 5},
}

// typoCase is one request with one misspelt (or made-up) name.
type typoCase struct {
	name, method, path, body string
	parameter, didYouMean    string // didYouMean "" means: none offered
}

// Every operation of openapi.yaml the generated router serves (locks, rwlocks,
// semaphores, elections, barriers, double barriers, queues, throughput, kv,
// counters, groups, partitions, leases, the session, the lists and the event
// streams) refuses a query parameter it does not declare, and every operation
// with a JSON body refuses a member its schema does not declare: 400
// unknown-parameter naming it and the declared name it is closest to, and
// nothing changes in ZooKeeper, though the state each request names is live (a
// request that went through would release, revoke, write or enrol).
func TestUnknownParametersAreRefused(t *testing.T) {
	run := startSpecRun(t, func(car *sidecartest.Sidecar, lease string) {
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/typo-x?lease="+lease)
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/typo-x?mode=read&lease="+lease)
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/typo-x/permits?max=2&lease="+lease)
		car.Send(t, http.StatusCreated, http.MethodPost, "/v1/elections/typo-x/candidates?id=x&lease="+lease, `{"value":"v"}`)
		car.Must(t, http.StatusNoContent, http.MethodPut, "/v1/barriers/typo-x")
		car.Must(t, http.StatusConflict, http.MethodPost, "/v1/double-barriers/typo-x/participants?id=x&count=2&lease="+lease)
		if r, err := car.Do(context.Background(), http.MethodPost, "/v1/queues/typo-x/items", strings.NewReader("item"), "Content-Type", "text/plain"); err != nil || r.Status != http.StatusCreated {
			t.Fatalf("enqueue: %v %+v", err, r)
		}
		car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/typo-x", `{"limit":100}`)
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/typo-x/members?id=x&lease="+lease)
		car.MustPut(t, "/v1/kv/typo-x", []byte("1"), "text/plain")
		car.Send(t, http.StatusOK, http.MethodPut, "/v1/counters/typo-x", `{"value":7}`)
		car.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/typo-x/members?id=x&lease="+lease, `{"value":"v"}`)
		car.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/typo-x", `{"count":2}`)
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/partitions/typo-x/members?id=x&lease="+lease)
	})
	car, lease := run.car, run.lease

	cases := []typoCase{
		// The issue's own: each went through with a default the client did not ask for.
		{"ttl as tll", "POST", "/v1/locks/typo-test?owner=me&tll=30s", "", "tll", "ttl"},
		{"wait as wiat", "POST", "/v1/locks/typo-x?wiat=5s", "", "wiat", "wait"},
		{"limit as limt", "PUT", "/v1/throughput/typo-x", `{"limit":10,"limt":5}`, "limt", "limit"},
		{"case differs", "POST", "/v1/locks/typo-test?TTL=30s", "", "TTL", "ttl"},
		{"misspelt required id", "POST", "/v1/elections/typo-x/candidates?idd=y", "", "idd", "id"},
		{"nothing close", "POST", "/v1/locks/typo-test?colour=red", "", "colour", ""},
		{"a parameter where none is taken", "GET", "/v1/session?verbose=1", "", "verbose", ""},
		{"a known name and an unknown one", "DELETE", "/v1/locks/typo-x?lease=" + lease + "&force=true", "", "force", ""},
	}
	cases = append(cases, specTypoCases(t, lease)...)
	kinds := map[string]bool{}
	for _, c := range cases {
		kind, _, _ := strings.Cut(strings.TrimPrefix(c.path, "/v1/"), "/")
		kind, _, _ = strings.Cut(kind, "?")
		kinds[kind] = true
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a stream let through would not end
			defer cancel()
			var hdr []string
			if c.body != "" {
				hdr = []string{"Content-Type", "application/json"}
			}
			r, err := car.Do(ctx, c.method, c.path, strings.NewReader(c.body), hdr...)
			if err != nil {
				t.Fatal(err)
			}
			sidecartest.ProblemIs(t, r, http.StatusBadRequest, "unknown-parameter")
			if got := sidecartest.Str(r.Body["parameter"]); got != c.parameter {
				t.Fatalf("parameter %q, want %q: %s", got, c.parameter, r.Raw)
			}
			got, offered := r.Body["didYouMean"]
			if c.didYouMean == "" && offered {
				t.Fatalf("didYouMean %v offered for a name far from every one: %s", got, r.Raw)
			}
			if c.didYouMean != "" && sidecartest.Str(got) != c.didYouMean {
				t.Fatalf("didYouMean %v, want %q: %s", got, c.didYouMean, r.Raw)
			}
			if !strings.Contains(sidecartest.Str(r.Body["detail"]), c.parameter) {
				t.Fatalf("the detail does not name %q: %s", c.parameter, r.Raw)
			}
		})
	}
	for _, k := range []string{"locks", "rwlocks", "semaphores", "elections", "barriers", "double-barriers", "queues",
		"throughput", "kv", "counters", "groups", "partitions", "leases", "session", "events"} {
		if !kinds[k] {
			t.Errorf("no case of %s", k)
		}
	}
	run.unchanged(t)

	// The metrics count a refusal under its route.
	metrics := string(car.Must(t, http.StatusOK, http.MethodGet, "/metrics").Raw)
	if want := `coord_http_requests_total{code="400",route="POST /v1/locks/{name}"}`; !strings.Contains(metrics, want) {
		t.Fatalf("no %s in the metrics", want)
	}

	// A query the binder would drop a pair of is refused too; the names as
	// declared still go through.
	r := car.DoReq(t, http.MethodPost, "/v1/locks/typo-test?wait=1s;ttl=5s", nil)
	sidecartest.ProblemIs(t, r, http.StatusBadRequest, "invalid-parameter")
	r = car.DoReq(t, http.MethodPost, "/v1/locks/typo-test?owner=me&ttl=30s", nil)
	if r.Status != http.StatusCreated || sidecartest.Str(r.Body["owner"]) != "me" {
		t.Fatalf("declared parameters: %d %s", r.Status, r.Raw)
	}
}

// specTypoCases makes, for every operation of the generated router, one request
// with a misspelt query parameter (each declared one with its last letter
// doubled, or a made-up one where none is declared) and, for one with a JSON
// body, one with a misspelt member of a valid body.
func specTypoCases(t *testing.T, lease string) []typoCase {
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	var cases []typoCase
	for _, o := range specOps(t) {
		method, path := o.method, o.path
		concrete := concretePath(path, lease)
		var declared []string // sorted, as o.query is
		for _, p := range o.query {
			declared = append(declared, p.Name)
		}
		if len(declared) == 0 {
			cases = append(cases, typoCase{method + " " + path + " made up", method, concrete + "?bogus=1", "", "bogus", ""})
		}
		for _, q := range declared {
			typo := q + q[len(q)-1:]
			cases = append(cases, typoCase{method + " " + path + " " + typo, method, concrete + "?" + typo + "=1", "", typo, q})
		}
		if o.op.RequestBody == nil || o.op.RequestBody.Value.Content["application/json"] == nil {
			continue
		}
		valid := validBody(t, spec, method, path, o.op.RequestBody.Value.Content["application/json"].Schema)
		for field := range valid {
			body := map[string]any{field + field[len(field)-1:]: valid[field]}
			for k, v := range valid {
				body[k] = v
			}
			b, err := json.Marshal(body)
			if err != nil {
				t.Fatal(err)
			}
			cases = append(cases, typoCase{method + " " + path + " body " + field, method, concrete + bodyQuery(declared, lease),
				string(b), field + field[len(field)-1:], field})
		}
	}
	return cases
}

// validBody is a valid body of a request body schema: typoBodies', else the
// schema's example in openapi.yaml, which must be an object.
func validBody(t *testing.T, spec *openapi3.T, method, path string, ref *openapi3.SchemaRef) map[string]any {
	t.Helper()
	schema := ref.Ref[strings.LastIndex(ref.Ref, "/")+1:]
	if valid, ok := typoBodies[schema]; ok {
		return valid
	}
	if s := spec.Components.Schemas[schema]; s != nil && s.Value != nil {
		if valid, ok := s.Value.Example.(map[string]any); ok && len(valid) > 0 {
			return valid
		}
	}
	t.Fatalf("%s %s: no valid %s body: give its schema an example in openapi.yaml, or typoBodies one", method, path, schema)
	return nil
}

// concretePath fills a path template with the names of the live state.
func concretePath(path, lease string) string {
	return strings.NewReplacer("{name}", "typo-x", "{group}", "typo-x", "{key}", "typo-x", "{lease}", lease,
		"{id}", "x", "{claim}", "x", "{permit}", "x", "{service}", "typo-x").Replace(path)
}

// bodyQuery is the valid query a body case sends, so that only its body is wrong:
// a new id (a request let through would enrol it) and the live lease.
func bodyQuery(declared []string, lease string) string {
	var q []string
	if slices.Contains(declared, "id") {
		q = append(q, "id=y")
	}
	if slices.Contains(declared, "lease") {
		q = append(q, "lease="+lease)
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + strings.Join(q, "&")
}
