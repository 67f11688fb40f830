package line

import (
	"testing"
	"time"
)

// Grants dates holds: this sidecar's own exactly; a node seen waiting, at the
// first read that sees it hold; a node first seen holding, not at all (its
// creation time is shown); marks of nodes gone go with the next read.
func TestGrantsDateHolds(t *testing.T) {
	var g Grants
	own := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	g.Granted("/l/a", own)
	if got := g.Read("/l", []string{"a"}, []string{"b"}); !got["a"].Equal(own) {
		t.Fatalf("own grant: %v, want %v", got["a"], own)
	}
	before := time.Now()
	g.Gone("/l/a")
	got := g.Read("/l", []string{"b"}, nil)
	if at, ok := got["b"]; !ok || at.Before(before) {
		t.Fatalf("b, seen waiting, then holding: %v %v, want at or after %v", at, ok, before)
	}
	if again := g.Read("/l", []string{"b"}, nil); !again["b"].Equal(got["b"]) {
		t.Fatalf("b's since moved: %v then %v", got["b"], again["b"])
	}
	if got := g.Read("/m", []string{"x"}, nil); len(got) != 0 {
		t.Fatalf("first seen holding: %v, want nothing known", got)
	}
	g.Read("/l", nil, nil) // b gone
	if g.n != 0 || len(g.m["/l"]) != 0 {
		t.Fatalf("marks left: %d %v", g.n, g.m)
	}
	g.Waiting("/e/c")
	g.Read("/e", []string{"lead"}, nil) // a listing made before c's node: c stays marked
	if got := g.Read("/e", []string{"c"}, nil); got["c"].IsZero() {
		t.Fatal("own waiting candidate not dated when it leads")
	}
}
