package queue

import (
	"context"
	"errors"
	"path"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A take whose transaction answer is lost with the connection is settled by its
// receipt: the taker learns it won, and the item is neither lost nor left.
func TestTakeSettledByReceiptAfterLostAnswer(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSession(t, []string{proxy.Addr()}, root)
	q := New(s, nil)
	t.Cleanup(func() { s.Close(); q.Close() })
	ep, err := s.Current()
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
	if err := ep.EnsureContainer(ctx, q.rpath("settle")); err != nil {
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
