package kv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func ptr[T any](v T) *T { return &v }

// Versions, create-only, compare-and-set and the content type, and what a plain
// ZooKeeper client (Curator's NodeCache, kazoo's DataWatch) sees: the bytes.
func TestPutGetVersions(t *testing.T) {
	k, conn, root := newTestStore(t)
	ctx := context.Background()

	if _, err := k.Get(ctx, "flag"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("absent key: %v", err)
	}
	v, err := k.Put(ctx, "flag", []byte(`{"on":true}`), "application/json", ptr(Absent), nil)
	if err != nil || v != 0 {
		t.Fatalf("create-only: %d %v", v, err)
	}
	var mm *VersionMismatchError
	if _, err := k.Put(ctx, "flag", []byte("x"), "", ptr(Absent), nil); !errors.As(err, &mm) || mm.Version != 0 {
		t.Fatalf("create-only on an existing key: %v", err)
	}
	if v, err = k.Put(ctx, "flag", []byte(`{"on":false}`), "application/json", ptr(int32(0)), nil); err != nil || v != 1 {
		t.Fatalf("compare-and-set: %d %v", v, err)
	}
	if _, err := k.Put(ctx, "flag", []byte("x"), "", ptr(int32(0)), nil); !errors.As(err, &mm) || mm.Version != 1 {
		t.Fatalf("stale version: %v", err)
	}
	got, err := k.Get(ctx, "flag")
	if err != nil || string(got.Data) != `{"on":false}` || got.ContentType != "application/json" || got.Version != 1 {
		t.Fatalf("get: %+v %v", got, err)
	}
	// The node holds exactly the bytes.
	data, st, err := conn.Get(root + "/kv/flag")
	if err != nil || string(data) != `{"on":false}` || st.Version != 1 {
		t.Fatalf("raw node: %q %+v %v", data, st, err)
	}
	testForeignWrite(t, k, conn, root)
}

// newTestStore is a Store on a session of its own, a plain client, and the root.
func newTestStore(t *testing.T) (*Store, *zk.Conn, string) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	return New(zookeepertest.NewSession(t, zkc.Servers(), root), nil), zktest.Connect(t, zkc.Servers(), 5*time.Second), root
}

// testForeignWrite: a write by another client keeps no type.
func testForeignWrite(t *testing.T, k *Store, conn *zk.Conn, root string) {
	ctx := context.Background()
	// A foreign write keeps no type: the value reads as octet-stream, never with the stale type.
	if _, err := conn.Set(root+"/kv/flag", []byte{0xff, 0x00}, 1); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Get(ctx, "flag"); err != nil || got.ContentType != DefaultContentType || got.Version != 2 {
		t.Fatalf("after a foreign write: %+v %v", got, err)
	}
}

// Writes and deletes at any version or at one, and what they leave behind.
func TestPutDeleteAnyVersion(t *testing.T) {
	k, conn, root := newTestStore(t)
	ctx := context.Background()
	var mm *VersionMismatchError
	// Any version: create or set.
	if v, err := k.Put(ctx, "other", []byte("1"), "text/plain", nil, nil); err != nil || v != 0 {
		t.Fatalf("blind create: %d %v", v, err)
	}
	if v, err := k.Put(ctx, "other", []byte("2"), "", nil, nil); err != nil || v != 1 {
		t.Fatalf("blind set: %d %v", v, err)
	}
	if got, _ := k.Get(ctx, "other"); got.ContentType != DefaultContentType {
		t.Fatalf("a write without a type keeps none: %+v", got)
	}
	if err := k.Delete(ctx, "other", ptr(int32(0))); !errors.As(err, &mm) || mm.Version != 1 {
		t.Fatalf("stale delete: %v", err)
	}
	if err := k.Delete(ctx, "other", ptr(int32(1))); err != nil {
		t.Fatal(err)
	}
	if err := k.Delete(ctx, "other", nil); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("delete of an absent key: %v", err)
	}
	if _, err := k.Put(ctx, "other", []byte("x"), "", ptr(int32(3)), nil); !errors.As(err, &mm) || mm.Version != Absent {
		t.Fatalf("compare-and-set on an absent key: %v", err)
	}
	if ok, _, _ := conn.Exists(root + "/kv-meta/other"); ok {
		t.Fatal("the type outlived its key")
	}
	if _, err := k.Put(ctx, "flag", nil, "", nil, nil); err != nil {
		t.Fatal(err)
	}
	names, err := k.List(ctx)
	if err != nil || len(names) != 1 || names[0] != "flag" {
		t.Fatalf("list: %v %v", names, err)
	}
}

// A leased key is ephemeral, held by its lease (shown in its holds), written in
// place while held, and gone when the lease is revoked.
func TestLeasedKeyEndsWithItsLease(t *testing.T) {
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
	if _, err := k.Put(ctx, "svc-a", []byte("10.0.0.1:80"), "text/plain", nil, l); err != nil {
		t.Fatal(err)
	}
	if h := l.Holds(); len(h) != 1 || h[0] != (kit.Hold{Kind: Kind, Name: "svc-a"}) {
		t.Fatalf("holds %v", h)
	}
	if v, err := k.Put(ctx, "svc-a", []byte("10.0.0.2:80"), "text/plain", ptr(int32(0)), l); err != nil || v != 1 {
		t.Fatalf("rewrite: %d %v", v, err)
	}
	_, st, err := conn.Get(root + "/kv/svc-a")
	if err != nil || st.EphemeralOwner == 0 {
		t.Fatalf("not ephemeral: %+v %v", st, err)
	}
	// Another lease cannot take it over.
	l2, _ := leases.Grant(time.Minute, false)
	var mm *VersionMismatchError
	if _, err := k.Put(ctx, "svc-a", []byte("x"), "", nil, l2); !errors.As(err, &mm) || mm.Version != 1 {
		t.Fatalf("another lease's write: %v", err)
	}
	if err := leases.Revoke(l.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/kv/svc-a", "/kv-meta/svc-a"} {
		if ok, _, err := conn.Exists(root + p); ok || err != nil {
			t.Fatalf("%s outlived its lease: %v", p, err)
		}
	}
	// Now absent, the other lease may announce itself.
	if _, err := k.Put(ctx, "svc-a", []byte("x"), "", nil, l2); err != nil {
		t.Fatal(err)
	}
	// Deleted through the API: no longer the lease's.
	if err := k.Delete(ctx, "svc-a", nil); err != nil {
		t.Fatal(err)
	}
	if h := l2.Holds(); len(h) != 0 {
		t.Fatalf("holds after delete: %v", h)
	}
}

// One follower per key: every change reaches it, including a delete, and the
// server holds one watch for the key however many handles follow it.
func TestFollowOneWatch(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	k := New(zookeepertest.NewSession(t, zkc.Servers(), root), nil)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	ctx := context.Background()

	var handles []*kit.Follower[*Value]
	for range 50 {
		f, err := k.Follow("cfg")
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, f)
	}
	defer func() {
		for _, f := range handles {
			f.Close()
		}
	}()
	f := handles[0]
	await := func(what string, cond func(*Value) bool) {
		t.Helper()
		if _, ok := f.Await(ctx, 10*time.Second, func(v *Value) bool { return !v.Unknown && cond(v) }); !ok {
			t.Fatalf("no state: %s", what)
		}
	}
	await("absent", func(v *Value) bool { return !v.Exists })
	for _, p := range []string{root, root + "/kv"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := conn.Create(root+"/kv/cfg", []byte("a"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	await("created", func(v *Value) bool { return v.Exists && string(v.Data) == "a" })
	if _, err := k.Put(ctx, "cfg", []byte("b"), "text/plain", nil, nil); err != nil {
		t.Fatal(err)
	}
	await("changed", func(v *Value) bool { return string(v.Data) == "b" && v.ContentType == "text/plain" && v.Version == 1 })
	testutil.Eventually(t, 10*time.Second, "one watch on the key", func() bool {
		return zktest.WatchedPaths(t, zkc.Server(0), root+"/kv/cfg") == 1
	})
	if err := k.Delete(ctx, "cfg", nil); err != nil {
		t.Fatal(err)
	}
	await("deleted", func(v *Value) bool { return !v.Exists && v.Version == Absent })
}

// A leased key whose value node another hand deletes takes its type node
// with it when the lease lets the lost hold go: the key's next value, plain
// and of the default type, does not show the old type.
func TestLostLeasedKeyLeavesNoType(t *testing.T) {
	k, conn, root := newTestStore(t)
	ctx := context.Background()
	leases := kit.NewLeases(k.s, nil)
	t.Cleanup(leases.Close)
	lease, err := leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Put(ctx, "typed", []byte("<p>"), "text/html", nil, lease); err != nil {
		t.Fatal(err)
	}
	if err := conn.Delete(root+"/kv/typed", -1); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the hold reported lost", func() bool {
		lost, _ := lease.LostHolds(0)
		return len(lost) == 1
	})
	testutil.Eventually(t, 10*time.Second, "the type node deleted", func() bool {
		ok, _, err := conn.Exists(root + "/kv-meta/typed")
		return err == nil && !ok
	})
	if _, err := k.Put(ctx, "typed", []byte("bytes"), "", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := k.Get(ctx, "typed"); err != nil || got.ContentType != DefaultContentType {
		t.Fatalf("the key's next value: %+v %v, want the default type", got, err)
	}
}
