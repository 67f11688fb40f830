package kit

import (
	"regexp"
	"strings"
	"testing"
)

func TestValidName(t *testing.T) {
	good := []string{"a", "A9", "db-migrate", "x.y_z-1", "a..b", strings.Repeat("n", 128)}
	bad := []string{"", ".", "..", "-a", "_c_x", ".hidden", "a/b", "a b", "é", strings.Repeat("n", 129), "a\x00"}
	for _, s := range good {
		if !ValidName(s) {
			t.Errorf("ValidName(%q) = false", s)
		}
	}
	for _, s := range bad {
		if ValidName(s) {
			t.Errorf("ValidName(%q) = true", s)
		}
	}
}

// TestValidNameMatchesItsPattern compares ValidName with the pattern its doc
// states, over every short string of an alphabet that has each class of byte.
func TestValidNameMatchesItsPattern(t *testing.T) {
	re := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	alphabet := []string{"a", "Z", "0", ".", "_", "-", "/", " ", "é", "\x00", "~"}
	var walk func(s string, depth int)
	walk = func(s string, depth int) {
		if ValidName(s) != re.MatchString(s) {
			t.Fatalf("ValidName(%q) = %v, pattern says %v", s, ValidName(s), re.MatchString(s))
		}
		if depth == 0 {
			return
		}
		for _, c := range alphabet {
			walk(s+c, depth-1)
		}
	}
	walk("", 4)
	for _, n := range []int{127, 128, 129} {
		s := "a" + strings.Repeat("b", n-1)
		if ValidName(s) != re.MatchString(s) {
			t.Errorf("length %d: ValidName %v, pattern %v", n, ValidName(s), re.MatchString(s))
		}
	}
}
