package api

import (
	"net/url"
	"testing"
)

// plainQuery binds a plain query as url.ParseQuery and the generated binding
// would (the first and only value of each key, an absent key unset) and
// declines every query the generated binding must answer itself: anything to
// unescape, a ';', a key of the operation given twice.
func TestPlainQueryAsParseQuery(t *testing.T) {
	keys := acquireKeys[:]
	plain := []string{
		"", "wait=30s", "wait=30s&ttl=10s", "lease=abc&owner=me&wait=0s&ttl=1s",
		"wait=", "wait", "&&wait=1s&", "other=1&wait=2s", "owner=a=b", "wait=30s&other=1&other=2",
	}
	for _, raw := range plain {
		vals := make([]string, len(keys))
		var set uint8
		if !plainQuery(raw, keys, vals, &set) {
			t.Errorf("%q: declined, want bound", raw)
			continue
		}
		want, err := url.ParseQuery(raw)
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		for i, k := range keys {
			got, ok := vals[i], set&(1<<i) != 0
			w, wok := want[k]
			if ok != wok || (ok && (len(w) != 1 || got != w[0])) {
				t.Errorf("%q: %s = %q (given %v), ParseQuery %q", raw, k, got, ok, w)
			}
		}
	}
	for _, raw := range []string{
		"wait=30s&wait=1s", "wait=1%73", "owner=a+b", "wait=1s;ttl=2s", "w%61it=1s", "lease=a&lease=a",
	} {
		vals := make([]string, len(keys))
		var set uint8
		if plainQuery(raw, keys, vals, &set) {
			t.Errorf("%q: bound, want declined (the generated binding answers it)", raw)
		}
	}
}

// An acquire's parameters point at the values given and are nil for the
// others, as the generated binding leaves them.
func TestAcquireQueryParams(t *testing.T) {
	var q acquireQuery
	if !plainQuery("ttl=5s&owner=me", acquireKeys[:], q.vals[:], &q.set) {
		t.Fatal("declined")
	}
	p := q.params()
	if p.Wait != nil || p.Lease != nil || p.Ttl == nil || *p.Ttl != "5s" || p.Owner == nil || *p.Owner != "me" {
		t.Fatalf("params %+v", p)
	}
	if p := (&acquireQuery{}).params(); p.Wait != nil || p.Ttl != nil || p.Lease != nil || p.Owner != nil {
		t.Fatalf("no query: %+v", p)
	}
}
