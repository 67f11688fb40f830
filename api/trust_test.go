package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
)

func TestHostList(t *testing.T) {
	l := DefaultAllowedHosts("tcp", "127.0.0.1:8080")
	for host, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.1": true, "localhost:8080": true, "LocalHost:9": true,
		"[::1]:8080": true, "[::1]": true, "": false, "rebind.evil.example": false,
		"rebind.evil.example:8080": false, "127.0.0.2:8080": false, "localhost.evil.example": false,
	} {
		if got := l.allows(host); got != want {
			t.Errorf("default loopback allows(%q) = %v, want %v", host, got, want)
		}
	}
	if l := DefaultAllowedHosts("tcp", "[::1]:8080"); !l.allows("[::1]:8080") || l.allows("evil") {
		t.Errorf("[::1] default: %v", l)
	}
	if l := DefaultAllowedHosts("tcp", "127.1.2.3:80"); !l.allows("127.1.2.3") || l.allows("evil") {
		t.Errorf("127.1.2.3 default: %v", l)
	}
	for _, addr := range []string{"0.0.0.0:8080", ":8080", "10.0.0.5:8080", "[::]:80"} {
		if l := DefaultAllowedHosts("tcp", addr); l != nil || !l.allows("anything.example") {
			t.Errorf("%s: want every host, got %v", addr, l)
		}
	}
	if l := DefaultAllowedHosts("unix", "/run/coord.sock"); !l.allows("localhost") || l.allows("evil") {
		t.Errorf("unix default: %v", l)
	}
	ports := HostList{"sidecar.internal:8443", "app.example"}
	if !ports.allows("sidecar.internal:8443") || ports.allows("sidecar.internal:80") || !ports.allows("app.example:1") {
		t.Error("ports are not matched as written")
	}
	if !(HostList{"*"}).allows("x") {
		t.Error("* does not allow every host")
	}
}

func TestTokens(t *testing.T) {
	list, err := ParseTokens([]byte(`{"tokens":[
		{"name":"app","token":"app-0123456789abcdef","allow":["locks/billing-*","queues/jobs","*/shared-*"]},
		{"name":"ro","token":"ro-0123456789abcdef","allow":["*"],"readOnly":true},
		{"name":"none","token":"none-0123456789abcdef"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	set, err := compileTokens(list)
	if err != nil {
		t.Fatal(err)
	}
	app, ro, none := set.byName["app"], set.byName["ro"], set.byName["none"]
	for _, c := range []struct {
		p           *principal
		kind, name  string
		write, want bool
	}{
		{app, "locks", "billing-1", true, true},
		{app, "locks", "billing-", true, true},
		{app, "locks", "billing", true, false},
		{app, "locks", "other", false, false},
		{app, "queues", "jobs", true, true},
		{app, "queues", "jobs2", true, false},
		{app, "elections", "shared-x", true, true},
		{app, "rwlocks", "billing-1", true, false},
		{ro, "locks", "x", false, true},
		{ro, "locks", "x", true, false},
		{none, "locks", "x", false, false},
		{anonymous, "kv", "x", true, true},
	} {
		if got := c.p.may(c.kind, c.name, c.write); got != c.want {
			t.Errorf("%s may %s/%s (write %v) = %v", c.p.name, c.kind, c.name, c.write, got)
		}
	}
	keep := overviewFilter(context.WithValue(context.Background(), principalKey{}, app))
	var kept []string
	for _, k := range []string{"session", "lock/billing-1", "lock/x", "queue/jobs", "election/shared-1", "barrier/x", "unknown/x"} {
		if keep(k) {
			kept = append(kept, k)
		}
	}
	if !slices.Equal(kept, []string{"session", "lock/billing-1", "queue/jobs", "election/shared-1"}) {
		t.Errorf("the app's stream keeps %v", kept)
	}
	var never Tokens
	if never.load() != nil {
		t.Error("tokens never set require authentication")
	}
	empty, err := NewTokens(nil)
	if err != nil || empty.load() == nil || empty.load().bearer(httptest.NewRequest("GET", "/v1/locks", nil)) != nil {
		t.Error("an empty token list should let no request through")
	}
	if overviewFilter(context.Background()) != nil {
		t.Error("no token: the stream should not be filtered")
	}
	for _, bad := range []string{
		`{"tokens":[{"name":"a","token":"short"}]}`,
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["locks/a/b"]}]}`,
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["*/*x"]}]}`,
		`{"tokens":[{"name":"","token":"0123456789abcdefgh"}]}`,
		`{"tokens":[{"name":"a","token":"0123456789 abcdefgh"}]}`,
		`{"tokens":{}}`,
		`{}`,
		`[]`,
	} {
		if _, err := ParseTokens([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// The status page's ticket: minted for a valid token only, accepted until it
// expires, refused when tampered with or once its token is gone or changed.
func TestTicket(t *testing.T) {
	tokens, err := NewTokens([]Token{{Name: "dash", Token: "dash-0123456789abcdef", Allow: []string{"locks/*"}, ReadOnly: true}})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opt: Options{Tokens: tokens}, ticketKey: newTicketKey()}
	mint := func(token string) (*http.Cookie, int) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/ui/ticket", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		s.serveTicket(w, r)
		cs := w.Result().Cookies()
		if len(cs) == 0 {
			return nil, w.Code
		}
		return cs[0], w.Code
	}
	if _, code := mint("wrong"); code != 401 {
		t.Fatalf("a wrong token got %d", code)
	}
	c, code := mint("dash-0123456789abcdef")
	if code != 204 || c == nil || !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/v1/events" {
		t.Fatalf("ticket: %d %+v", code, c)
	}
	use := func(value string) *principal {
		r := httptest.NewRequest("GET", "/v1/events", nil)
		r.AddCookie(&http.Cookie{Name: ticketCookie, Value: value})
		return s.ticketPrincipal(s.opt.Tokens.load(), r)
	}
	if p := use(c.Value); p == nil || p.name != "dash" {
		t.Fatal("a fresh ticket is refused")
	}
	parts := strings.Split(c.Value, ".")
	for _, forged := range []string{
		parts[0] + "." + parts[1] + "." + parts[2][:len(parts[2])-2] + "AA",
		parts[0] + ".99999999999." + parts[2],
		"ZGFzaA.1." + parts[2],
		"",
		"a.b",
	} {
		if use(forged) != nil {
			t.Errorf("forged ticket %q accepted", forged)
		}
	}
	if err := tokens.Set([]Token{{Name: "dash", Token: "dash-NEW-0123456789abcdef", Allow: []string{"*"}}}); err != nil {
		t.Fatal(err)
	}
	if use(c.Value) != nil {
		t.Error("a ticket outlived its token's change")
	}
}
