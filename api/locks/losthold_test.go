package locks_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Lost holds (issue 24, item 1): a hold whose ZooKeeper node is deleted by
// another hand than the lease's release has ended, and the lease says so.

// The reproduction: with --zk-auth, a root created before by someone
// else leaves the lock's parent open; an anonymous ZooKeeper client deletes the
// holder's node. The lease's stream names the lost hold, the lease no longer
// lists it, and the next holder's fencing token is higher.
func TestLostHoldUnderAnOpenParent(t *testing.T) {
	t.Parallel() // see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	anon := sidecartest.ZkClient(t, zkc.Servers(), "")
	for _, p := range []string{root, root + "/locks", root + "/locks/a-victim"} {
		if _, err := anon.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	a := sidecartest.Start(t, zkc.Servers(), root, "--zk-auth", sidecartest.AppAuth)
	lease := sidecartest.Str(a.Must(t, 201, "POST", "/v1/leases?ttl=30s").Body["lease"])
	events := a.OpenStream(t, "/v1/leases/"+lease+"/events")
	if ev := events.Next(t, 10*time.Second); ev.Name != "lease" {
		t.Fatalf("first event %q", ev.Name)
	}
	victim := a.Must(t, 201, "POST", "/v1/locks/a-victim?lease="+lease)

	holders, _, err := anon.Children(root + "/locks/a-victim")
	if err != nil || len(holders) != 1 {
		t.Fatalf("holder nodes: %v %v", holders, err)
	}
	if err := anon.Delete(root+"/locks/a-victim/"+holders[0], -1); err != nil {
		t.Fatalf("the anonymous client could not delete the holder's node: %v", err)
	}

	ev := events.Next(t, 10*time.Second)
	if ev.Name != "lost-hold" || ev.Data["kind"] != "lock" || ev.Data["name"] != "a-victim" || sidecartest.Str(ev.Data["reason"]) == "" {
		t.Fatalf("lease stream after the delete: %q %v", ev.Name, ev.Data)
	}
	if holds := a.Must(t, 200, "GET", "/v1/leases/"+lease).Body["holds"].([]any); len(holds) != 0 {
		t.Fatalf("the lease still lists %v", holds)
	}
	next := a.Must(t, 201, "POST", "/v1/locks/a-victim?ttl=30s")
	if sidecartest.Num(next.Body["fencingToken"]) <= sidecartest.Num(victim.Body["fencingToken"]) {
		t.Fatalf("next holder's token %v, the lost one's %v", next.Body["fencingToken"], victim.Body["fencingToken"])
	}
	if got := sidecartest.MetricValue(t, a, `coord_holds_lost_total{kind="lock"}`); got != 1 {
		t.Fatalf("coord_holds_lost_total{kind=lock} = %v", got)
	}
	// The lease itself lives on, and a release of what it lost is not-held.
	a.Must(t, 404, "DELETE", "/v1/locks/a-victim?lease="+lease)
	a.Must(t, 200, "POST", "/v1/leases/"+lease+"/keepalive")
}

// Every kind of hold is watched: deleting its node by hand ends it, and the
// lease's stream names it; releases by the lease itself are never reported.
func TestEveryKindOfHoldReportsItsLostNode(t *testing.T) {
	t.Parallel() // see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	raw := sidecartest.ZkClient(t, zkc.Servers(), "")
	json := []string{"Content-Type", "application/json"}
	put := func(path, body string) {
		t.Helper()
		if r, err := a.Do(context.Background(), "PUT", path, strings.NewReader(body), json...); err != nil || r.Status/100 != 2 {
			t.Fatalf("PUT %s: %v %v", path, r, err)
		}
	}
	if r, err := a.Do(context.Background(), "POST", "/v1/queues/q/items", strings.NewReader("job")); err != nil || r.Status != 201 {
		t.Fatalf("enqueue: %v %v", r, err)
	}
	put("/v1/throughput/tg", `{"limit":100}`)
	put("/v1/partitions/pg", `{"count":4}`)

	kinds := []struct {
		kind, name string
		acquire    func(lease string)
		node       string // a part of the held node's path; with a final $, its end
	}{
		{"lock", "lk", func(l string) { a.Must(t, 201, "POST", "/v1/locks/lk?lease="+l) }, "/locks/lk/"},
		{"rwlock", "rw", func(l string) { a.Must(t, 201, "POST", "/v1/rwlocks/rw?mode=write&lease="+l) }, "/rwlocks/rw/"},
		{"semaphore", "sem", func(l string) { a.Must(t, 201, "POST", "/v1/semaphores/sem/permits?max=2&lease="+l) }, "/semaphores/sem/"},
		{"candidate", "el/c1", func(l string) { a.Must(t, 201, "POST", "/v1/elections/el/candidates?id=c1&lease="+l) }, "/elections/el/"},
		{"barrier", "bar", func(l string) { a.Must(t, 204, "PUT", "/v1/barriers/bar?lease="+l) }, "/barriers/bar"},
		{"double-barrier", "db/p1", func(l string) {
			a.Must(t, 409, "POST", "/v1/double-barriers/db/participants?id=p1&count=2&wait=0s&lease="+l)
		}, "/double-barriers/db/"},
		{"group", "gr/m1", func(l string) { a.Must(t, 201, "POST", "/v1/groups/gr/members?id=m1&lease="+l) }, "/groups/gr/"},
		{"kv", "leased", func(l string) { put("/v1/kv/leased?lease="+l, "v") }, "/kv/"},
		{"claim", "q/", func(l string) { a.Must(t, 200, "POST", "/v1/queues/q/claims?lease="+l) }, "/claim$"},
		{"throughput", "tg/m1", func(l string) { a.Must(t, 201, "POST", "/v1/throughput/tg/members?id=m1&lease="+l) }, "/throughput/tg/members/"},
		{"partitions", "pg/w1", func(l string) { a.Must(t, 201, "POST", "/v1/partitions/pg/members?id=w1&lease="+l) }, "/members/w1"},
		{"service", "sv/i1", func(l string) { a.Send(t, 201, "PUT", "/v1/services/sv/instances/i1?lease="+l, `{"address":"h"}`) }, "/services/sv/i1"},
	}
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) { checkLostHold(t, a, raw, root, k.kind, k.name, k.node, k.acquire) })
	}

	// Releases by the lease itself, and the lease's end, are not losses.
	lease := sidecartest.Str(a.Must(t, 201, "POST", "/v1/leases?ttl=60s").Body["lease"])
	events := a.OpenStream(t, "/v1/leases/"+lease+"/events")
	events.Next(t, 10*time.Second)
	for i := 0; i < 20; i++ {
		a.Must(t, 201, "POST", "/v1/locks/own?lease="+lease)
		a.Must(t, 204, "DELETE", "/v1/locks/own?lease="+lease)
	}
	a.Must(t, 201, "POST", "/v1/locks/own?lease="+lease)
	a.Must(t, 204, "DELETE", "/v1/leases/"+lease)
	if ev := events.Next(t, 10*time.Second); ev.Name != "revoked" {
		t.Fatalf("own releases reported: %q %v", ev.Name, ev.Data)
	}
	testutil.Eventually(t, 10*time.Second, "no loss counted for own releases", func() bool {
		return sidecartest.MetricValue(t, a, `coord_holds_lost_total{kind="lock"}`) == 1 // the subtest's one
	})
}

// checkLostHold acquires one hold of kind for a fresh lease, deletes its node
// (the one new ephemeral node whose path has node: a part, or with a final $ its
// end) with raw, and checks that the lease's stream names the lost hold and the
// lease no longer lists it.
func checkLostHold(t *testing.T, a *sidecartest.Sidecar, raw *zk.Conn, root, kind, name, node string, acquire func(lease string)) {
	before := zktest.Snapshot(t, raw, root)
	lease := sidecartest.Str(a.Must(t, 201, "POST", "/v1/leases?ttl=60s").Body["lease"])
	events := a.OpenStream(t, "/v1/leases/"+lease+"/events")
	events.Next(t, 10*time.Second) // lease
	acquire(lease)
	var held []string
	for _, n := range zktest.Snapshot(t, raw, root) {
		isNew := !slices.ContainsFunc(before, func(b zktest.Node) bool { return b.Path == n.Path })
		part, atEnd := strings.CutSuffix(node, "$")
		matches := strings.Contains(n.Path, part) && (!atEnd || strings.HasSuffix(n.Path, part))
		if isNew && n.Stat.EphemeralOwner != 0 && matches {
			held = append(held, n.Path)
		}
	}
	if len(held) != 1 {
		t.Fatalf("the held node: want one new ephemeral node with %q, got %v", node, held)
	}
	if err := raw.Delete(held[0], -1); err != nil {
		t.Fatal(err)
	}
	ev := events.Next(t, 10*time.Second)
	if ev.Name != "lost-hold" || ev.Data["kind"] != kind || !strings.HasPrefix(sidecartest.Str(ev.Data["name"]), name) {
		t.Fatalf("after deleting %s: %q %v", held[0], ev.Name, ev.Data)
	}
	if holds := a.Must(t, 200, "GET", "/v1/leases/"+lease).Body["holds"].([]any); len(holds) != 0 {
		t.Fatalf("the lease still lists %v", holds)
	}
	// The lease's own end releases nothing it lost, and reports nothing more.
	a.Must(t, 204, "DELETE", "/v1/leases/"+lease)
	if ev := events.Next(t, 10*time.Second); ev.Name != "revoked" {
		t.Fatalf("after the revoke: %q %v", ev.Name, ev.Data)
	}
}

// Watching held nodes costs one ZooKeeper watch per held node, and no more
// (issue 24: at most one more than before): ten locks held, ten watched holder
// nodes; released, none.
func TestAHeldLockCostsOneWatch(t *testing.T) {
	t.Parallel() // see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	lease := sidecartest.Str(a.Must(t, 201, "POST", "/v1/leases?ttl=60s").Body["lease"])
	for i := range 10 {
		a.Must(t, 201, "POST", "/v1/locks/w"+strconv.Itoa(i)+"?lease="+lease)
	}
	testutil.Eventually(t, 10*time.Second, "one watched node per held lock", func() bool {
		return zktest.WatchedPaths(t, zkc.Server(0), root+"/locks") == 10
	})
	a.Must(t, 204, "DELETE", "/v1/leases/"+lease)
	testutil.Eventually(t, 10*time.Second, "no watch left once released", func() bool {
		return zktest.WatchedPaths(t, zkc.Server(0), root+"/locks") == 0
	})
}

// A leased key deleted through the API, by another client of the same
// sidecar, is no longer the lease's, and the lease's stream says so at once.
func TestLeasedKeyDeletedThroughTheAPIIsALostHold(t *testing.T) {
	t.Parallel() // see TestMain
	zkc := zktest.Shared(t)
	a := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	lease := sidecartest.Str(a.Must(t, 201, "POST", "/v1/leases?ttl=60s").Body["lease"])
	events := a.OpenStream(t, "/v1/leases/"+lease+"/events")
	events.Next(t, 10*time.Second) // lease
	a.MustPut(t, "/v1/kv/cfg?lease="+lease, []byte("v"), "text/plain")
	a.Must(t, 204, "DELETE", "/v1/kv/cfg")
	if holds := a.Must(t, 200, "GET", "/v1/leases/"+lease).Body["holds"].([]any); len(holds) != 0 {
		t.Fatalf("the lease still lists %v", holds)
	}
	if ev := events.Next(t, 10*time.Second); ev.Name != "lost-hold" || ev.Data["kind"] != "kv" || ev.Data["name"] != "cfg" {
		t.Fatalf("after the delete: %q %v", ev.Name, ev.Data)
	}
	// Written again with the lease, the key is its own again.
	a.MustPut(t, "/v1/kv/cfg?lease="+lease, []byte("w"), "text/plain")
	if holds := a.Must(t, 200, "GET", "/v1/leases/"+lease).Body["holds"].([]any); len(holds) != 1 {
		t.Fatalf("holds after writing again: %v", holds)
	}
}
