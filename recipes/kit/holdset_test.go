package kit

import (
	"maps"
	"testing"
)

// A holdSet keeps its first hold inline and the rest in a map: every entry is
// found, replaced and removed wherever it lives, and a freed inline place is
// taken by the next new hold.
func TestHoldSetKeepsEveryEntry(t *testing.T) {
	var s holdSet
	a, b, c := Hold{"lock", "a"}, Hold{"lock", "b"}, Hold{"elect", "a"}
	ea, eb, ec, ea2 := &held{}, &held{}, &held{}, &held{}
	s.set(a, ea)
	s.set(b, eb)
	s.set(c, ec)
	s.set(a, ea2) // replaced in place, not added
	if n := s.len(); n != 3 {
		t.Fatalf("len %d, want 3", n)
	}
	want := map[Hold]*held{a: ea2, b: eb, c: ec}
	if got := maps.Collect(s.all()); !maps.Equal(got, want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	s.del(a) // the inline one
	if _, ok := s.get(a); ok {
		t.Fatal("a still found after del")
	}
	s.set(b, ec) // the inline place is free, but b is in the map: it stays there
	d := Hold{"lock", "d"}
	s.set(d, ea) // takes the inline place
	s.del(Hold{"lock", "none"})
	want = map[Hold]*held{b: ec, c: ec, d: ea}
	if got := maps.Collect(s.all()); !maps.Equal(got, want) || s.len() != 3 {
		t.Fatalf("entries %v (len %d), want %v", got, s.len(), want)
	}
	for h, e := range want {
		if got, ok := s.get(h); !ok || got != e {
			t.Fatalf("get %v = %v %v, want %v", h, got, ok, e)
		}
	}
	for h := range want {
		s.del(h)
	}
	if s.len() != 0 {
		t.Fatalf("len %d after deleting everything", s.len())
	}
}
