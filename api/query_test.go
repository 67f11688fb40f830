package api

import (
	"net/url"
	"testing"
)

// TestQueryValueAsParseQuery: queryValue answers what url.ParseQuery(raw).Get
// does, for the queries a client may send.
func TestQueryValueAsParseQuery(t *testing.T) {
	for _, raw := range []string{
		"", "wait", "wait=", "wait=5s", "lease=x&wait=5s", "wait=5s&wait=1s", "w%61it=2s", "wait=1%73",
		"wait=%zz&wait=3s", "wa%zzit=1s&wait=4s", "a=b;c&wait=6s", "wait=7s;x", "wait+=8s", "wait=9s+",
		"&&wait=10s&", "=1&wait=11s", "WAIT=1s",
	} {
		want := ""
		if q, err := url.ParseQuery(raw); err == nil || q != nil {
			want = q.Get("wait")
		}
		if got := queryValue(raw, "wait"); got != want {
			t.Errorf("queryValue(%q) = %q, ParseQuery gives %q", raw, got, want)
		}
	}
}
