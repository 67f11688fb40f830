package guid

import (
	"regexp"
	"testing"
)

// TestNewIsAVersion4UUID checks the form protected creates rely on: 36
// characters, lowercase hex in groups of 8-4-4-4-12, version 4, variant 10,
// and no repeat over many calls.
func TestNewIsAVersion4UUID(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 10000 {
		g := New()
		if !form.MatchString(g) {
			t.Fatalf("New() = %q, not a version 4 UUID", g)
		}
		if seen[g] {
			t.Fatalf("New() repeated %q", g)
		}
		seen[g] = true
	}
}
