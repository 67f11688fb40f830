package specrules

import (
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"slices"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
)

// Nearest offers the declared name a typo most likely meant, and nothing when
// every declared name is far from it.
func TestNearest(t *testing.T) {
	lock := []string{"lease", "owner", "ttl", "wait"}
	for _, c := range []struct {
		name  string
		known []string
		want  string
	}{
		{"tll", lock, "ttl"},
		{"wiat", lock, "wait"},
		{"TTL", lock, "ttl"},
		{"leas", lock, "lease"},
		{"ownr", lock, "owner"},
		{"colour", lock, ""},
		{"x", []string{"id"}, ""},
		{"idd", []string{"id", "ttl"}, "id"},
		{"verison", []string{"version", "wait"}, "version"},
		{"reqeue", []string{"lease", "requeue"}, "requeue"},
		{"timeout", lock, ""},
		{"", lock, ""},
		{"limt", []string{"limit"}, "limit"},
		{"anything", nil, ""},
	} {
		if got := Nearest(c.name, c.known); got != c.want {
			t.Errorf("Nearest(%q, %v) = %q, want %q", c.name, c.known, got, c.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"ttl", "ttl", 0}, {"", "abc", 3}, {"tll", "ttl", 1}, {"wiat", "wait", 1},
		{"ca", "abc", 3}, {"kitten", "sitting", 3}, {"limt", "limit", 1}, {"ab", "ba", 1},
	} {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.b, c.a, got, c.want)
		}
	}
}

// unknownField finds a member no schema declares, at any depth, and lets
// through what a schema leaves open.
func TestUnknownField(t *testing.T) {
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	schema := func(name string) *Body {
		return &Body{schema: spec.Components.Schemas[name].Value}
	}
	for _, c := range []struct {
		schema, body string
		field        string
		known        []string
	}{
		{"ThroughputLimit", `{"limit":10}`, "", nil},
		{"ThroughputLimit", `{"limit":10,"limt":5}`, "limt", []string{"limit"}},
		{"ThroughputMemberUpdate", `{"weight":1,"demand":null,"wieght":2}`, "wieght", []string{"demand", "weight"}},
		{"PartitionSet", `{"partitions":["a"],"count":1}`, "", nil},
		{"CounterValue", `{"value":1,"vaule":2}`, "vaule", []string{"value"}},
		// Problem allows other members (additionalProperties: true).
		{"Problem", `{"type":"t","title":"x","status":400,"holder":{}}`, "", nil},
		// LockHeldProblem: allOf Problem (open), so open.
		{"LockHeldProblem", `{"type":"t","anything":1}`, "", nil},
		// Nested, through an allOf: the holder inside a lock's state.
		{"LockState", `{"name":"n","holder":{"owner":"o","fencingToken":1,"since":"x","extra":1},"waiters":0}`, "holder/extra", []string{"fencingToken", "owner", "since"}},
	} {
		var v any
		if err := json.Unmarshal([]byte(c.body), &v); err != nil {
			t.Fatal(err)
		}
		got, known := unknownField(schema(c.schema).schema, v, "")
		if got != c.field || (c.known != nil && !slices.Equal(known, c.known)) {
			t.Errorf("%s %s: unknown %q among %v, want %q among %v", c.schema, c.body, got, known, c.field, c.known)
		}
	}
}

// CheckQuery scans the query without url.ParseQuery's map, and refuses
// and names exactly what a ParseQuery-based check would.
func TestCheckQueryNamesAgreesWithParseQuery(t *testing.T) {
	known := []string{"wait", "ttl", "lease", "owner"}
	viaParse := func(raw string) (ok bool, unknown string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return false, ""
		}
		names := slices.Sorted(maps.Keys(q))
		for _, k := range names {
			if !slices.Contains(known, k) {
				return false, k
			}
		}
		return true, ""
	}
	for _, raw := range []string{
		"wait=1s", "wait=1s&ttl=5s", "tll=5s", "wait=1s;ttl=5s", "zz=1&aa=2&wait=1s",
		"wait=%zz", "w%61it=1s", "%zz=1", "a+b=1", "wait=1s&&ttl=2s", "=v", "&", "lease=x&owner=a%20b",
		"own%65r=me&tll=1", "wait", "wait=&ttl=",
	} {
		err := CheckQuery(raw, known)
		ok, unknown := viaParse(raw)
		if (err == nil) != ok {
			t.Errorf("%q: err %v, ParseQuery says ok=%v", raw, err, ok)
			continue
		}
		var u *Unknown
		if unknown != "" && (!errors.As(err, &u) || u.Name != unknown) {
			t.Errorf("%q: %v, want %q named", raw, err, unknown)
		}
	}
}
