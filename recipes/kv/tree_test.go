package kv

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func TestCheckKey(t *testing.T) {
	for _, ok := range []string{"a", "config/app/db", "a/b/c/d/e/f/g/h", "x.y/z_1"} {
		if err := CheckKey(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/a", "a/", "a//b", "a/b/c/d/e/f/g/h/i", "a/.b", "a/b c", "a/" + strings.Repeat("x", 129)} {
		if err := CheckKey(bad); !errors.Is(err, kit.ErrInvalidName) {
			t.Errorf("%q: %v, want invalid name", bad, err)
		}
	}
}

// Nested keys are nested nodes holding the bytes (as kazoo and zkCli read a
// config tree); put, compare-and-set, get and delete work on them; a key
// holds a value and has children; its parents, made with empty data, read as
// empty values.
func TestNestedKeys(t *testing.T) {
	k, conn, root := newTestStore(t)
	ctx := context.Background()

	v, err := k.Put(ctx, "config/app/db", []byte("postgres://db"), "text/plain", ptr(Absent), nil)
	if err != nil || v != 0 {
		t.Fatalf("create nested: %d %v", v, err)
	}
	data, st, err := conn.Get(root + "/kv/config/app/db")
	if err != nil || string(data) != "postgres://db" || st.Version != 0 {
		t.Fatalf("raw node: %q %v", data, err)
	}
	if data, _, err := conn.Get(root + "/kv/config/app"); err != nil || len(data) != 0 {
		t.Fatalf("parent: %q %v", data, err)
	}
	got, err := k.Get(ctx, "config/app/db")
	if err != nil || string(got.Data) != "postgres://db" || got.ContentType != "text/plain" {
		t.Fatalf("get: %+v %v", got, err)
	}
	if got, err := k.Get(ctx, "config/app"); err != nil || len(got.Data) != 0 || got.Version != 0 {
		t.Fatalf("a parent reads as an empty value: %+v %v", got, err)
	}
}

// A key with children holds a value too, and is deleted only once they are
// gone; a nested key's delete leaves neither its node nor its type node.
func TestNestedKeyWithChildren(t *testing.T) {
	k, conn, root := newTestStore(t)
	ctx := context.Background()
	if _, err := k.Put(ctx, "config/app/db", []byte("postgres://db"), "text/plain", ptr(Absent), nil); err != nil {
		t.Fatal(err)
	}
	if v, err := k.Put(ctx, "config/app", []byte("v1"), "", ptr(int32(0)), nil); err != nil || v != 1 {
		t.Fatalf("value on a parent: %d %v", v, err)
	}
	var mm *VersionMismatchError
	if _, err := k.Put(ctx, "config/app/db", []byte("x"), "", ptr(int32(5)), nil); !errors.As(err, &mm) || mm.Version != 0 {
		t.Fatalf("stale compare-and-set: %v", err)
	}
	// Without a type a nested key needs no type node.
	if _, err := k.Put(ctx, "config/web/port", []byte("8080"), "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, "config/app", nil); !errors.Is(err, ErrHasChildren) {
		t.Fatalf("delete of a key with children: %v", err)
	}
	if err := k.Delete(ctx, "config/app/db", ptr(int32(0))); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/kv/config/app/db", "/kv-meta/config/app/db"} {
		if ok, _, _ := conn.Exists(root + p); ok {
			t.Fatalf("%s left behind", p)
		}
	}
	if _, err := k.Get(ctx, "config/app/db"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("deleted: %v", err)
	}
}

// The recursive list walks only the subtrees the prefix reaches; the plain
// one lists a level; a recursive delete removes the subtree, types included.
func TestNamesAndDeleteTree(t *testing.T) {
	k, conn, root := newTestStore(t)
	ctx := context.Background()
	keys := []string{"config/app/db", "config/app/db/pool", "config/app/cache", "config/apps", "config/web/port", "other"}
	for _, key := range keys {
		if _, err := k.Put(ctx, key, []byte(key), "text/plain", nil, nil); err != nil {
			t.Fatal(key, err)
		}
	}
	for _, c := range []struct {
		prefix    string
		recursive bool
		want      []string
	}{
		{"config/app/", true, []string{"config/app/cache", "config/app/db", "config/app/db/pool"}},
		{"config/app", true, []string{"config/app", "config/app/cache", "config/app/db", "config/app/db/pool", "config/apps"}},
		{"", true, []string{"config", "config/app", "config/app/cache", "config/app/db", "config/app/db/pool", "config/apps", "config/web", "config/web/port", "other"}},
		{"config/app/", false, []string{"config/app/cache", "config/app/db"}},
		{"config/", false, []string{"config/app", "config/apps", "config/web"}},
		{"", false, []string{"config", "other"}},
		{"nothing/", true, []string{}},
	} {
		got, err := k.Names(ctx, c.prefix, c.recursive)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Names(%q, %v) = %v, %v; want %v", c.prefix, c.recursive, got, err, c.want)
		}
	}
	n, err := k.DeleteTree(ctx, "config/app")
	if err != nil || n != 4 {
		t.Fatalf("delete tree: %d %v", n, err)
	}
	for _, p := range []string{"/kv/config/app", "/kv-meta/config/app"} {
		if ok, _, _ := conn.Exists(root + p); ok {
			t.Fatalf("%s left behind", p)
		}
	}
	if got, _ := k.Names(ctx, "", true); !slices.Equal(got, []string{"config", "config/apps", "config/web", "config/web/port", "other"}) {
		t.Fatalf("after the delete: %v", got)
	}
	if _, err := k.DeleteTree(ctx, "config/app"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("again: %v", err)
	}
	// A key made again under a deleted subtree gets its parents again.
	if _, err := k.Put(ctx, "config/app/db", []byte("again"), "text/plain", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// A leased nested key is ephemeral, held by its lease, and gone with it; a
// recursive delete over it ends the lease's hold; no key goes under it.
func TestLeasedNestedKey(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), root)
	leases := kit.NewLeases(s, nil)
	t.Cleanup(leases.Close)
	k := New(s, nil)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()

	l, err := leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, "svc/web/w1", []byte("10.0.0.1:80"), "text/plain", nil, l); err != nil {
		t.Fatal(err)
	}
	if h := l.Holds(); len(h) != 1 || h[0] != (kit.Hold{Kind: Kind, Name: "svc/web/w1"}) {
		t.Fatalf("holds %v", h)
	}
	if _, st, err := conn.Get(root + "/kv/svc/web/w1"); err != nil || st.EphemeralOwner == 0 {
		t.Fatalf("not ephemeral: %v", err)
	}
	if _, err := k.Put(ctx, "svc/web/w1/x", []byte("x"), "", nil, nil); !errors.Is(err, ErrLeasedParent) {
		t.Fatalf("a key under a leased key: %v", err)
	}
	if err := leases.Revoke(l.ID); err != nil {
		t.Fatal(err)
	}
	if ok, _, _ := conn.Exists(root + "/kv/svc/web/w1"); ok {
		t.Fatal("outlived its lease")
	}
	l2, _ := leases.Grant(time.Minute, false)
	if _, err := k.Put(ctx, "svc/web/w2", []byte("b"), "", nil, l2); err != nil {
		t.Fatal(err)
	}
	if _, err := k.DeleteTree(ctx, "svc"); err != nil {
		t.Fatal(err)
	}
	if h := l2.Holds(); len(h) != 0 {
		t.Fatalf("holds after the recursive delete: %v", h)
	}
}

// A follower of a nested key sees its changes.
func TestFollowNestedKey(t *testing.T) {
	k, _, _ := newTestStore(t)
	ctx := context.Background()
	f, err := k.Follow("a/b")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := k.Put(ctx, "a/b", []byte("1"), "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if v, ok := f.Await(ctx, 30*time.Second, func(v *Value) bool { return v.Exists && string(v.Data) == "1" }); !ok {
		t.Fatalf("not seen: %+v", v)
	}
	if _, err := k.Follow("a/b/c/d/e/f/g/h/i"); !errors.Is(err, kit.ErrInvalidName) {
		t.Fatalf("nine segments: %v", err)
	}
}
