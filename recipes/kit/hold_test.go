package kit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// nodeHolding holds one ephemeral node; Release deletes it.
type nodeHolding struct {
	ep   *zookeeper.Epoch
	path string
}

func (n *nodeHolding) Release(ctx context.Context) error {
	err := n.ep.Delete(ctx, n.path, -1)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil
	}
	return err
}

// otherHolding is a holding of another type than the one held.
type otherHolding struct{}

func (otherHolding) Release(context.Context) error { return nil }

// Take of a holding as the wrong type answers ErrNotHeld and changes nothing:
// the lease still holds it, and releases it (its node goes) when it ends.
func TestTakeOfAnotherTypeKeepsTheHolding(t *testing.T) {
	s := zookeepertest.NewSession(t, zktest.Shared(t).Servers(), zktest.Root(t))
	leases := kit.NewLeases(s, nil)
	t.Cleanup(func() { leases.Close() })
	ctx := context.Background()
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.EnsurePersistent(ctx, s.Root()); err != nil {
		t.Fatal(err)
	}
	l, err := leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	h := kit.Hold{Kind: "node", Name: "n"}
	node := s.Root() + "/held"
	_, _, err = kit.Acquire(ctx, l, h, func(ctx context.Context, ep *zookeeper.Epoch) (*nodeHolding, error) {
		if _, err := ep.Create(ctx, node, nil, zookeeper.Ephemeral); err != nil {
			return nil, err
		}
		return &nodeHolding{ep: ep, path: node}, nil
	})
	if err != nil {
		t.Fatal(err)
	}

	if _, err := kit.Take[otherHolding](l, h); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("Take as another type: %v, want ErrNotHeld", err)
	}
	if _, ok := kit.Lookup[*nodeHolding](l, h); !ok {
		t.Fatal("the lease lost its holding to a Take of another type")
	}
	if err := leases.Revoke(l.ID); err != nil {
		t.Fatal(err)
	}
	if ok, _, err := ep.Exists(ctx, node); err != nil || ok {
		t.Fatalf("after the lease ended, the held node exists: %v (err %v): the holding was never released", ok, err)
	}
}
