package recipes

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

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

func TestSortBySeqIgnoresPrefixes(t *testing.T) {
	in := []string{
		"_c_b-lock-0000000007",
		"9f8e__lock__0000000003", // kazoo
		"lock-0000000005",        // go-zookeeper without protection
		"_c_a-lock-0000000001",
		"readme", // not a contender
	}
	want := []string{"_c_a-lock-0000000001", "9f8e__lock__0000000003", "lock-0000000005", "_c_b-lock-0000000007"}
	if got := sortBySeq(in); !slices.Equal(got, want) {
		t.Fatalf("sortBySeq = %v, want %v", got, want)
	}
}

func newTestSession(t *testing.T, servers []string, root string) *Session {
	t.Helper()
	s, err := NewSession(Config{
		Servers: servers, Timeout: 2 * time.Second, Root: root,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	deadline := time.Now().Add(30 * time.Second)
	for s.State() != StateConnected {
		if time.Now().After(deadline) {
			t.Fatal("session never connected")
		}
		select {
		case <-s.Changed():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s
}

// A protected create whose reply is lost with the connection leaves exactly one
// node, adopted by the same session.
func TestProtectedCreateAdoptsAfterLostReply(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy, err := faultproxy.New(zkc.Server(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s := newTestSession(t, []string{proxy.Addr()}, root)
	ep, err := s.current()
	if err != nil {
		t.Fatal(err)
	}
	parent := path.Join(root, "locks", "lost-reply")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ensureContainer(ctx, ep, parent); err != nil {
		t.Fatal(err)
	}
	guid := newGUID()
	proxy.DropReplies(1)
	made, err := createProtected(ctx, ep, parent, guid, "lock-", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	node := made.Path
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	children, _, err := conn.Children(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 || parent+"/"+children[0] != node {
		t.Fatalf("children %v, want exactly the adopted %s", children, node)
	}
	_, st, err := conn.Exists(node)
	if err != nil || st.EphemeralOwner != ep.id.Load() {
		t.Fatalf("node owner %x, session %x (%v)", st.EphemeralOwner, ep.id.Load(), err)
	}
}

// A node with our guid made under another session is never adopted.
func TestProtectedNodeOfAnotherSessionIsNotAdopted(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := newTestSession(t, zkc.Servers(), root)
	ep, _ := s.current()
	other := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	parent := path.Join(root, "locks", "foreign")
	ctx := context.Background()
	if err := ensureContainer(ctx, ep, parent); err != nil {
		t.Fatal(err)
	}
	guid := newGUID()
	if _, err := other.Create(parent+"/"+protectedPrefix(guid)+"lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	found, err := findProtected(ctx, ep, parent, guid)
	if err != nil || found != "" {
		t.Fatalf("findProtected = %q, %v; want nothing adopted", found, err)
	}
}

// A take whose transaction answer is lost with the connection is settled by its
// receipt: the taker learns it won, and the item is neither lost nor left.
func TestTakeSettledByReceiptAfterLostAnswer(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy, err := faultproxy.New(zkc.Server(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proxy.Close() })
	s := newTestSession(t, []string{proxy.Addr()}, root)
	q := NewQueues(s, nil)
	ep, err := s.current()
	if err != nil {
		t.Fatal(err)
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	item := path.Join(root, "queues", "settle", "p00", "b0000000000", "i0-x-0000000000")
	for _, p := range []string{root, path.Join(root, "queues"), path.Join(root, "queues", "settle"), path.Join(root, "queues", "settle", "p00"), path.Join(root, "queues", "settle", "p00", "b0000000000")} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	if _, err := conn.Create(item, []byte("payload"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	receipt := q.rpath("settle") + "/settle-item"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ensureContainer(ctx, ep, q.rpath("settle")); err != nil {
		t.Fatal(err)
	}
	proxy.DropReplies(1)
	out, err := q.deleteWithReceipt(ctx, ep, "settle", item, receipt, 0)
	if err != nil || out != outWon {
		t.Fatalf("deleteWithReceipt = %v, %v; want won", out, err)
	}
	if ok, _, _ := conn.Exists(item); ok {
		t.Fatal("the item is still there after a won take")
	}
}
