package specrules

import (
	"encoding/json"
	"errors"
	"maps"
	"net/url"
	"slices"
	"strings"
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
// and names exactly what a ParseQuery-based check would: an unknown name
// first, else an empty value or a parameter given twice.
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
		for _, vs := range q {
			if len(vs) > 1 || vs[0] == "" {
				return false, ""
			}
		}
		return true, ""
	}
	for _, raw := range []string{
		"wait=1s", "wait=1s&ttl=5s", "tll=5s", "wait=1s;ttl=5s", "zz=1&aa=2&wait=1s",
		"wait=%zz", "w%61it=1s", "%zz=1", "a+b=1", "wait=1s&&ttl=2s", "=v", "&", "lease=x&owner=a%20b",
		"own%65r=me&tll=1", "wait", "wait=&ttl=", "wait=1s&wait=2s", "wait=1s&w%61it=1s", "owner=+", "tll=&wait=",
	} {
		err := CheckQuery(raw, NewQuery(known...))
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

// A declared parameter's value is held to its schema, and the refusal names
// the parameter, quotes the value and says what it takes.
func TestCheckQueryValues(t *testing.T) {
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	rules := New(spec)
	for _, c := range []struct {
		method, pattern, raw string
		param                string // "" : accepted
		want                 []string
	}{
		{"POST", "/v1/counters/{name}", "add=5", "", nil},
		{"POST", "/v1/counters/{name}", "add=-9223372036854775808", "", nil},
		{"POST", "/v1/counters/{name}", "add=1.5", "add", []string{`add="1.5"`, "not a whole number", "integer"}},
		{"POST", "/v1/counters/{name}", "add=9223372036854775808", "add", []string{"out of range", "9223372036854775807"}},
		{"POST", "/v1/counters/{name}", "add=", "add", []string{"add= is empty"}},
		{"POST", "/v1/rwlocks/{name}", "mode=read", "", nil},
		{"POST", "/v1/rwlocks/{name}", "mode=exclusive", "mode", []string{`"exclusive"`, "read, write"}},
		{"GET", "/v1/queues/{name}/items", "limit=0", "limit", []string{`"0"`, "from 1 to"}},
		{"DELETE", "/v1/elections/{name}/candidates/{id}", "requeue=maybe", "requeue", []string{`"maybe"`, "true or false"}},
		{"DELETE", "/v1/elections/{name}/candidates/{id}", "requeue=true", "", nil},
		{"POST", "/v1/locks/{name}", "ttl=1s&ttl=2s", "ttl", []string{"twice"}},
		{"GET", "/v1/locks", "prefix=" + strings.Repeat("é", 129), "prefix", []string{"129 characters", "at most 128"}},
		{"GET", "/v1/locks", "prefix=" + strings.Repeat("é", 128), "", nil},
	} {
		q, ok := rules.Query(c.method, c.pattern)
		if !ok {
			t.Fatalf("no rule for %s %s", c.method, c.pattern)
		}
		err := CheckQuery(c.raw, q)
		if c.param == "" {
			if err != nil {
				t.Errorf("%s: %v", c.raw, err)
			}
			continue
		}
		var r *Refused
		if !errors.As(err, &r) || r.Why != BadQuery || r.Param != c.param {
			t.Errorf("%s: %#v, want %s refused", c.raw, err, c.param)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.Detail, w) {
				t.Errorf("%s: %q does not say %q", c.raw, r.Detail, w)
			}
		}
	}
}

// A body is decoded in one pass that refuses a member given twice, and its
// values are held to their types in the client's terms.
func TestBodyStrict(t *testing.T) {
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	rules := New(spec)
	counter, _ := rules.Body("PUT", "/v1/counters/{name}")
	parts, _ := rules.Body("PUT", "/v1/partitions/{group}")
	for _, c := range []struct {
		b     Body
		body  string
		param string // "" with no want: accepted
		want  []string
	}{
		{counter, `{"value":5}`, "", nil},
		{counter, `{"value":5,"value":6}`, "value", []string{`"value" twice`}},
		{counter, `{"value":5,"val\u0075e":6}`, "value", []string{`"value" twice`}},
		{counter, `{"value":"5"}`, "value", []string{`"value" is "5"`, "an integer"}},
		{counter, `{"value":9223372036854775808}`, "value", []string{"out of range", "9223372036854775807"}},
		{counter, `{"value":1e3}`, "value", []string{"not a whole number"}},
		{counter, `{"value":1,}`, "", []string{"not valid JSON", "byte 11"}},
		{counter, `{"value":1`, "", []string{"not valid JSON", "ends before"}},
		{counter, `{"value":1} 2`, "", []string{"more data"}},
		{counter, strings.Repeat("[", 100), "", []string{"deeper"}},
		{parts, `{"partitions":["a","b"]}`, "", nil},
		{parts, `{"partitions":["a",2]}`, "partitions/1", []string{`"partitions/1" is 2`, "a string"}},
	} {
		err := c.b.Check("application/json", []byte(c.body))
		if c.param == "" && c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.body, err)
			}
			continue
		}
		var r *Refused
		if !errors.As(err, &r) || r.Why != BadBody || r.Param != c.param {
			t.Errorf("%.40s: %#v, want refused naming %q", c.body, err, c.param)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.Detail, w) {
				t.Errorf("%.40s: %q does not say %q", c.body, r.Detail, w)
			}
		}
	}
}

// Quote and Shorten keep at most MaxQuoted characters of a value.
func TestQuoteBounds(t *testing.T) {
	if got := Quote("abc"); got != `"abc"` {
		t.Errorf("Quote(abc) = %s", got)
	}
	long := strings.Repeat("é", 1000)
	q := Quote(long)
	if strings.Contains(q, strings.Repeat("é", MaxQuoted+1)) || !strings.Contains(q, strings.Repeat("é", MaxQuoted)) || !strings.Contains(q, "1000 characters") {
		t.Errorf("Quote of 1000 characters: %s", q)
	}
	if s := Shorten(long); s != strings.Repeat("é", MaxQuoted)+"…" {
		t.Errorf("Shorten: %d bytes", len(s))
	}
}
