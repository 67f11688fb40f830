package lock

import (
	"strconv"
	"testing"
)

// TestParentCachesBoundedNames checks the lines' paths Locks keeps: every
// answer is dir/name, a name met again gets the same path, and past maxParents
// names nothing more is kept (the paths are still right).
func TestParentCachesBoundedNames(t *testing.T) {
	l := &Locks{dir: "/app/locks"}
	for i := range maxParents + 100 {
		name := "lock-" + strconv.Itoa(i)
		if got, want := l.parent(name), "/app/locks/"+name; got != want {
			t.Fatalf("parent(%q) = %q, want %q", name, got, want)
		}
		if got := l.parent(name); got != "/app/locks/"+name {
			t.Fatalf("parent(%q) again = %q", name, got)
		}
	}
	kept := 0
	l.parents.Range(func(k, v any) bool {
		if v.(string) != "/app/locks/"+k.(string) {
			t.Errorf("kept %q -> %q", k, v)
		}
		kept++
		return true
	})
	if kept != maxParents || int(l.nParents.Load()) != maxParents {
		t.Fatalf("kept %d names (counted %d), want %d", kept, l.nParents.Load(), maxParents)
	}
}
