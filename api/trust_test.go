package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/api/tokens"
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

// A scoped token's /v1/events stream keeps only the session and the sections
// and names the token may read (by each section's token kind); without a token
// it is not filtered.
func TestOverviewFilter(t *testing.T) {
	set, err := tokens.NewTokens([]tokens.Token{{Name: "app", Token: "app-0123456789abcdef",
		Allow: []string{"locks/billing-*", "queues/jobs", "*/shared-*"}}}, tokens.Kinds{"locks", "queues"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{sectionTokens: map[string]string{"lock": "locks", "queue": "queues", "election": "elections", "barrier": "barriers"}}
	app := set.Active().ByName("app")
	keep := s.overviewFilter(tokens.NewContext(context.Background(), app))
	var kept []string
	for _, k := range []string{"session", "lock/billing-1", "lock/x", "queue/jobs", "election/shared-1", "barrier/x", "unknown/x"} {
		if keep(k) {
			kept = append(kept, k)
		}
	}
	if !slices.Equal(kept, []string{"session", "lock/billing-1", "queue/jobs", "election/shared-1"}) {
		t.Errorf("the app's stream keeps %v", kept)
	}
	if s.overviewFilter(context.Background()) != nil {
		t.Error("no token: the stream should not be filtered")
	}
}

// The status page's ticket: minted for a valid token only, accepted until it
// expires, refused when tampered with or once its token is gone or changed.
func TestTicket(t *testing.T) {
	set, err := tokens.NewTokens([]tokens.Token{{Name: "dash", Token: "dash-0123456789abcdef", Allow: []string{"locks/*"}, ReadOnly: true}}, tokens.Kinds{"locks"})
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{opt: Options{Tokens: set}, ticketKey: newTicketKey()}
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
	use := func(value string) *tokens.Principal {
		r := httptest.NewRequest("GET", "/v1/events", nil)
		r.AddCookie(&http.Cookie{Name: ticketCookie, Value: value})
		return s.ticketPrincipal(s.opt.Tokens.Active(), r)
	}
	if p := use(c.Value); p == nil || p.Name() != "dash" {
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
	if err := set.Set([]tokens.Token{{Name: "dash", Token: "dash-NEW-0123456789abcdef", Allow: []string{"*"}}}); err != nil {
		t.Fatal(err)
	}
	if use(c.Value) != nil {
		t.Error("a ticket outlived its token's change")
	}
}
