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
