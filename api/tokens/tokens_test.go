package tokens

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
)

// testKinds are the token kinds these tests allow.
var testKinds = Kinds{"locks", "queues", "elections", "rwlocks", "kv"}

func TestTokens(t *testing.T) {
	list, err := ParseTokens([]byte(`{"tokens":[
		{"name":"app","token":"app-0123456789abcdef","allow":["locks/billing-*","queues/jobs","*/shared-*","kv/config/*","kv/flags/app*"]},
		{"name":"ro","token":"ro-0123456789abcdef","allow":["*"],"readOnly":true},
		{"name":"none","token":"none-0123456789abcdef"}]}`), testKinds)
	if err != nil {
		t.Fatal(err)
	}
	set, err := compileTokens(list, testKinds)
	if err != nil {
		t.Fatal(err)
	}
	app, ro, none := set.byName["app"], set.byName["ro"], set.byName["none"]
	for _, c := range []struct {
		p           *Principal
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
		{Anonymous, "kv", "x", true, true},
		// A key's tree: kv/config/* covers every key under config/.
		{app, "kv", "config/app/db", true, true},
		{app, "kv", "config/a", false, true},
		{app, "kv", "config", false, false},
		{app, "kv", "configx/a", false, false},
		{app, "kv", "flags/app-1/x", false, true},
		{app, "kv", "flags/ap", false, false},
	} {
		if got := c.p.May(c.kind, c.name, c.write); got != c.want {
			t.Errorf("%s may %s/%s (write %v) = %v", c.p.name, c.kind, c.name, c.write, got)
		}
	}
	var never Tokens
	if never.Active() != nil {
		t.Error("tokens never set require authentication")
	}
	empty, err := NewTokens(nil, testKinds)
	if err != nil || empty.Active() == nil || empty.Active().ByBearer(httptest.NewRequest("GET", "/v1/locks", nil)) != nil {
		t.Error("an empty token list should let no request through")
	}
	for _, bad := range []string{
		`{"tokens":[{"name":"a","token":"short"}]}`,
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["locks/a//b"]}]}`,
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["kv/a*/b"]}]}`,
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["kv//a"]}]}`,
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["kv/a/"]}]}`,
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["counters/a"]}]}`, // not one of testKinds
		`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["*/*x"]}]}`,
		`{"tokens":[{"name":"","token":"0123456789abcdefgh"}]}`,
		`{"tokens":[{"name":"a","token":"0123456789 abcdefgh"}]}`,
		`{"tokens":{}}`,
		`{}`,
		`[]`,
	} {
		if _, err := ParseTokens([]byte(bad), testKinds); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

// A token's share of a global cap: its own cap when the tokens file gives one
// (never above the global one), else the global cap divided by the number of
// the file's tokens (here two: --token's is not one), at least 1; the --token
// token and requests without tokens have the global cap only.
func TestTokenShares(t *testing.T) {
	three, zero := 3, 0
	set, err := compileTokens([]Token{
		{Name: "plain", Token: "plain-0123456789"},
		{Name: "own", Token: "own-0123456789ab", MaxLeases: &three, MaxStreams: &zero},
		{Name: AllTokenName, Token: "all-0123456789ab"},
	}, testKinds)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p      *Principal
		res    int
		global int
		want   int
		own    bool
	}{
		{set.byName["plain"], Leases, 20, 10, true},
		{set.byName["plain"], Streams, 3, 1, true},
		{set.byName["plain"], Waiters, 1, 1, false}, // a cap of 1 still lets one through
		{set.byName["plain"], Waiters, 2, 1, true},
		{set.byName["own"], Leases, 20, 3, true},
		{set.byName["own"], Leases, 2, 2, false}, // never above the global cap
		{set.byName["own"], Streams, 20, 0, true},
		{set.byName["own"], Waiters, 20, 10, true},
		{set.byName[AllTokenName], Leases, 20, 20, false},
		{Anonymous, Streams, 20, 20, false},
	} {
		if got, own := c.p.Share(c.res, c.global); got != c.want || own != c.own {
			t.Errorf("%q %s of %d: %d (own %v), want %d (own %v)", c.p.name, ShareFields[c.res], c.global, got, own, c.want, c.own)
		}
	}
	if _, err := ParseTokens([]byte(`{"tokens":[{"name":"a","token":"0123456789abcdefgh","maxLeases":-1}]}`), testKinds); err == nil {
		t.Error("a negative maxLeases was accepted")
	}
}

// An allow entry naming a kind that is not one of the kinds given is refused,
// with the kinds listed in their order.
func TestUnknownKind(t *testing.T) {
	_, err := ParseTokens([]byte(`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["lock/x"]}]}`), Kinds{"locks", "queues"})
	want := `tokens file: token "a": allow "lock/x": unknown kind "lock" (one of locks, queues, or *)`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}

// Among three tokens, each default share is a third of the cap; explicit caps
// that add up to more than a global cap (with the default shares of the
// others) are reported, the default shares alone are not.
func TestSharesAmongThree(t *testing.T) {
	list := func(caps ...*int) []Token {
		var l []Token
		for i, c := range caps {
			l = append(l, Token{Name: fmt.Sprintf("t%d", i), Token: fmt.Sprintf("token-%d-0123456789", i), MaxLeases: c})
		}
		return append(l, Token{Name: AllTokenName, Token: "all-0123456789ab"})
	}
	set, err := compileTokens(list(nil, nil, nil), testKinds)
	if err != nil {
		t.Fatal(err)
	}
	if got, own := set.byName["t0"].Share(Leases, 300); got != 100 || !own {
		t.Fatalf("a default share of 300 among 3 tokens: %d (own %v), want 100", got, own)
	}
	globals := [NumShares]int{300, 6, 6}
	if got := Oversubscribed(list(nil, nil, nil), globals); got != nil {
		t.Fatalf("default shares reported oversubscribed: %q", got)
	}
	fits, big := 100, 250
	if got := Oversubscribed(list(&fits, nil, nil), globals); got != nil {
		t.Fatalf("100 + 100 + 100 of 300 reported: %q", got)
	}
	got := Oversubscribed(list(&big, nil, nil), globals)
	if len(got) != 1 || !strings.Contains(got[0], "maxLeases add up to 450, more than the global cap 300") {
		t.Fatalf("250 + 100 + 100 of 300: %q", got)
	}
}
