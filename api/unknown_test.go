package api

import (
	"testing"

	"github.com/coord-sidecar/coord-sidecar/api/specrules"
)

func TestUnknownParameterDetail(t *testing.T) {
	for _, c := range []struct {
		in, name string
		known    []string
		want     string
	}{
		{"query", "tll", []string{"lease", "ttl"}, `unknown query parameter "tll" (did you mean "ttl"?); the operation's query parameters: lease, ttl. Nothing was done`},
		{"query", "verbose", nil, `unknown query parameter "verbose"; the operation's query parameters: none. Nothing was done`},
		{"ThroughputLimit", "limt", []string{"limit"}, `unknown body field "limt" (did you mean "limit"?); ThroughputLimit's fields there: limit. Nothing was done`},
		{"LockState", "holder/ownr", []string{"owner"}, `unknown body field "holder/ownr" (did you mean "holder/owner"?); LockState's fields there: owner. Nothing was done`},
	} {
		if got := unknownParameter(&specrules.Unknown{In: c.in, Name: c.name, Known: c.known}).Detail; got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
