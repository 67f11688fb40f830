package zookeeper

import (
	"path"
	"regexp"
	"testing"
)

// TestProtectedPathNamesItsGUID checks the one string a protected create makes:
// parent/ProtectedPrefix(guid)infix, whose guid (a part of it) is a version 4
// UUID that GUIDOf reads back from the node's name, new at every call.
func TestProtectedPathNamesItsGUID(t *testing.T) {
	form := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 1000 {
		want, id := protectedPath("/app/locks/orders", "lock-")
		if !form.MatchString(id) {
			t.Fatalf("guid %q is not a version 4 UUID", id)
		}
		if exp := "/app/locks/orders/" + ProtectedPrefix(id) + "lock-"; want != exp {
			t.Fatalf("protectedPath = %q, want %q", want, exp)
		}
		if g, ok := GUIDOf(path.Base(want)); !ok || g != id {
			t.Fatalf("GUIDOf(%q) = %q, %v; want %q", path.Base(want), g, ok, id)
		}
		if seen[id] {
			t.Fatalf("guid %q repeated", id)
		}
		seen[id] = true
	}
}
