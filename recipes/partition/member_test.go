package partition

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// A member is visible to its group's follower from the moment this sidecar
// reserves its id, before its node is made (and its incarnation known): a take
// in that window makes no owner node, which would carry no incarnation (make
// test once caught the race on the incarnation under -race). Once the node is
// made, the same take makes the owner node with the member's incarnation.
func TestNoTakeBeforeTheMembersNode(t *testing.T) {
	zkc := zktest.Shared(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), zktest.Root(t))
	p := New(s, nil)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := &membership{p: p, group: "g", id: "a", ep: ep, weight: 1, mine: map[string]bool{}}
	m.take(ctx, []string{"p0"})
	owner := p.groupPath("g") + "/owners/p0"
	if ok, _, err := ep.Exists(ctx, owner); err != nil || ok {
		t.Fatalf("an owner node made before the member's node: %v %v", ok, err)
	}
	m.mu.Lock()
	m.incarnation = 42
	m.mu.Unlock()
	m.take(ctx, []string{"p0"})
	data, _, err := ep.Get(ctx, owner)
	if err != nil || string(data) != `{"member":"a","incarnation":42}` {
		t.Fatalf("owner node after the member's node: %q %v", data, err)
	}
}
