package api

import "testing"

// A token's share of a global cap: its own cap when the tokens file gives one
// (never above the global one), else half of the global cap, at least 1; the
// --token token and requests without tokens have the global cap only.
func TestTokenShares(t *testing.T) {
	three, zero := 3, 0
	set, err := compileTokens([]Token{
		{Name: "plain", Token: "plain-0123456789"},
		{Name: "own", Token: "own-0123456789ab", MaxLeases: &three, MaxStreams: &zero},
		{Name: AllTokenName, Token: "all-0123456789ab"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		p      *principal
		res    int
		global int
		want   int
		own    bool
	}{
		{set.byName["plain"], shareLeases, 20, 10, true},
		{set.byName["plain"], shareStreams, 3, 1, true},
		{set.byName["plain"], shareWaiters, 1, 1, false}, // a cap of 1 still lets one through
		{set.byName["plain"], shareWaiters, 2, 1, true},
		{set.byName["own"], shareLeases, 20, 3, true},
		{set.byName["own"], shareLeases, 2, 2, false}, // never above the global cap
		{set.byName["own"], shareStreams, 20, 0, true},
		{set.byName["own"], shareWaiters, 20, 10, true},
		{set.byName[AllTokenName], shareLeases, 20, 20, false},
		{anonymous, shareStreams, 20, 20, false},
	} {
		if got, own := c.p.share(c.res, c.global); got != c.want || own != c.own {
			t.Errorf("%q %s of %d: %d (own %v), want %d (own %v)", c.p.name, shareNames[c.res], c.global, got, own, c.want, c.own)
		}
	}
	if _, err := ParseTokens([]byte(`{"tokens":[{"name":"a","token":"0123456789abcdefgh","maxLeases":-1}]}`)); err == nil {
		t.Error("a negative maxLeases was accepted")
	}
}
