package zktest

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func TestStandalone(t *testing.T) {
	var nd *node
	t.Run("serve", func(t *testing.T) {
		c := StartStandalone(t)
		if got := c.Mode(0); got != "standalone" {
			t.Fatalf("Mode(0) = %q, want standalone", got)
		}
		if got := c.Leader(); got != 0 {
			t.Fatalf("Leader() = %d, want 0", got)
		}
		conn := Connect(t, c.Servers(), 2*time.Second)
		if _, err := conn.Create("/x", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}

		c.Kill(0)
		if got := c.Mode(0); got != "" {
			t.Fatalf("Mode after Kill = %q, want \"\"", got)
		}
		c.Restart(0)
		data, _, err := Connect(t, c.Servers(), 2*time.Second).Get("/x")
		if err != nil || string(data) != "v" {
			t.Fatalf("after restart Get(/x) = %q, %v; want v", data, err)
		}
		nd = c.c.nodes[0]
	})
	select {
	case <-nd.exitCh():
	default:
		t.Fatal("server still running after the test's cleanup")
	}
	if _, err := os.Stat(nd.dir); !os.IsNotExist(err) {
		t.Fatalf("server directory %s not removed: %v", nd.dir, err)
	}
}

func TestSharedAndDump(t *testing.T) {
	c := Shared(t)
	if got := Shared(t).Servers(); !slices.Equal(got, c.Servers()) {
		t.Fatalf("second Shared() = %v, want %v", got, c.Servers())
	}
	conn := Connect(t, c.Servers(), 2*time.Second)
	root := Root(t)
	if !strings.HasPrefix(root, "/t-TestSharedAndDump-") || root == Root(t) {
		t.Fatalf("Root = %q: want a unique /t-TestSharedAndDump-<hex>", root)
	}
	if got := Dump(t, conn, root); got != nil {
		t.Fatalf("Dump of a missing root = %v, want nil", got)
	}
	for _, p := range []string{root, root + "/b", root + "/a", root + "/a/x", root + "/a/x/y"} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{root, root + "/a", root + "/a/x", root + "/a/x/y", root + "/b"}
	if got := Dump(t, conn, root); !slices.Equal(got, want) {
		t.Fatalf("Dump = %v, want %v", got, want)
	}
}

// A snapshot sees every write: new, deleted, re-created and rewritten nodes,
// a rewrite with the same bytes included; reads change nothing.
func TestSnapshot(t *testing.T) {
	conn := Connect(t, Shared(t).Servers(), 2*time.Second)
	root := Root(t)
	if got := Snapshot(t, conn, root); got != nil {
		t.Fatalf("Snapshot of a missing root = %v, want nil", got)
	}
	acl := zk.WorldACL(zk.PermAll)
	for _, p := range []string{root, root + "/a", root + "/a/x", root + "/b", root + "/c"} {
		if _, err := conn.Create(p, []byte("v"), 0, acl); err != nil {
			t.Fatal(err)
		}
	}
	before := Snapshot(t, conn, root)
	if got := len(before); got != 5 || before[1].Path != root+"/a" || before[1].Data != "v" {
		t.Fatalf("Snapshot = %v", before)
	}
	if _, _, err := conn.Get(root + "/a"); err != nil {
		t.Fatal(err)
	}
	if d := SnapshotDiff(before, Snapshot(t, conn, root)); d != "" {
		t.Fatalf("a read changed the snapshot:\n%s", d)
	}
	if _, err := conn.Set(root+"/a/x", []byte("v"), -1); err != nil { // the same bytes
		t.Fatal(err)
	}
	if err := conn.Delete(root+"/b", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(root+"/b", []byte("v"), 0, acl); err != nil { // re-created as it was
		t.Fatal(err)
	}
	if err := conn.Delete(root+"/c", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Create(root+"/d", nil, 0, acl); err != nil {
		t.Fatal(err)
	}
	var marks []string
	for _, line := range strings.Split(SnapshotDiff(before, Snapshot(t, conn, root)), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] != "" && strings.Contains("+-~", f[0]) {
			marks = append(marks, f[0]+" "+strings.TrimPrefix(f[1], root))
		}
	}
	want := []string{"~ ", "~ /a/x", "~ /b", "- /c", "+ /d"} // the root: its cversion
	if !slices.Equal(marks, want) {
		t.Fatalf("diff marks %v, want %v", marks, want)
	}
}

func TestEnsemble(t *testing.T) {
	c := StartEnsemble(t, 3)
	old := c.Leader()
	if old < 0 {
		t.Fatal("no leader after StartEnsemble")
	}
	for i := range 3 {
		if m := c.Mode(i); i != old && m != "follower" {
			t.Fatalf("node %d mode %q, want follower", i, m)
		}
	}
	conn := Connect(t, c.Servers(), 4*time.Second)
	if _, err := conn.Create("/e", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	c.Kill(old)
	if m := c.Mode(old); m != "" {
		t.Fatalf("killed node reports mode %q", m)
	}
	leader := -1
	testutil.Eventually(t, 30*time.Second, "a new leader among the survivors", func() bool {
		leader = c.Leader()
		return leader >= 0 && leader != old
	})
	t.Logf("leader %d killed, node %d took over", old, leader)

	c.Restart(old)
	if m := c.Mode(old); m != "follower" && m != "leader" {
		t.Fatalf("restarted node mode %q, want follower or leader", m)
	}
	data, _, err := Connect(t, []string{c.Server(old)}, 4*time.Second).Get("/e")
	if err != nil || string(data) != "v" {
		t.Fatalf("Get(/e) via the restarted node = %q, %v; want v", data, err)
	}
}

// Stop ends a node with SIGTERM; the ensemble keeps serving on the other two,
// and once Restart has started it again AwaitSynced sees the leader count both
// followers as synced, with the data written while the node was down on it.
func TestStopAndAwaitSynced(t *testing.T) {
	c := StartEnsemble(t, 3)
	c.AwaitSynced(time.Minute)
	leader := c.Leader()
	follower := (leader + 1) % 3
	c.Stop(follower)
	if m := c.Mode(follower); m != "" {
		t.Fatalf("stopped node reports mode %q", m)
	}
	c.Stop(follower) // a stopped node: nothing to do
	others := []string{c.Server(leader), c.Server((leader + 2) % 3)}
	conn := Connect(t, others, 4*time.Second)
	if _, err := conn.Create("/while-down", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	c.Restart(follower)
	c.AwaitSynced(time.Minute)
	if n := syncedFollowers(c.Server(c.Leader())); n != 2 {
		t.Fatalf("synced followers %d after AwaitSynced, want 2", n)
	}
	data, _, err := Connect(t, []string{c.Server(follower)}, 4*time.Second).Get("/while-down")
	if err != nil || string(data) != "v" {
		t.Fatalf("Get(/while-down) via the restarted node = %q, %v; want v", data, err)
	}
}
