package kit_test

import (
	"context"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// A DirSource's subscriber sees the directory's valid names, sorted (a missing
// directory has none), then each change: the directory created with a name in
// it (its existence watch), names added and removed (its children watch),
// invalid names left out, the directory deleted and created again.
func TestDirSourceFollowsTheNames(t *testing.T) {
	s, ep := rootedSession(t)
	ctx := context.Background()
	dir := s.Root() + "/locks"
	reg := kit.NewFollowers(s, nil, func(p string) kit.Source[[]string] { return &kit.DirSource{Dir: p} })
	f := reg.Follow(dir)
	defer f.Close()
	seen := &states[[]string]{}
	defer f.Subscribe(seen.add)()

	seen.await(t, []string{}, "no names in a missing directory")
	if _, err := ep.Multi(ctx, creates(dir, dir+"/b")...); err != nil {
		t.Fatal(err)
	}
	seen.await(t, []string{"b"}, "the directory created with a name (its existence watch)")
	create(t, ep, dir+"/_c_0123-x", dir+"/.hidden", dir+"/a")
	seen.await(t, []string{"a", "b"}, "a name added, invalid ones left out (its children watch)")
	if _, err := ep.Multi(ctx, del(dir+"/a")...); err != nil {
		t.Fatal(err)
	}
	seen.await(t, []string{"b"}, "a name removed")
	if _, err := ep.Multi(ctx, del(dir+"/_c_0123-x", dir+"/.hidden", dir+"/b", dir)...); err != nil {
		t.Fatal(err)
	}
	seen.await(t, []string{}, "the directory deleted")
	if _, err := ep.Multi(ctx, creates(dir, dir+"/c")...); err != nil {
		t.Fatal(err)
	}
	seen.await(t, []string{"c"}, "the directory created again")
}
