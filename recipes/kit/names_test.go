package kit

import (
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
