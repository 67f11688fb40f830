package kv

import (
	"context"
	"errors"
	"fmt"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// leasedKey is a key written with a lease: the lease's holding. Its node is an
// ephemeral node of the lease's session; Release deletes it (if it is still
// the node the lease made) when the lease ends.
type leasedKey struct {
	k     *Store
	key   string
	lease *kit.Lease
	ep    *zookeeper.Epoch
	czxid int64
}

// putLeased writes key for lease (see Put).
func (k *Store) putLeased(ctx context.Context, lease *kit.Lease, key string, data []byte, contentType string, version *int32) (int32, error) {
	h := kit.Hold{Kind: Kind, Name: key}
	for {
		if g, ok := kit.Lookup[*leasedKey](lease, h); ok {
			v, err := k.rewrite(ctx, g, data, contentType, version)
			if errors.Is(err, zookeeper.ErrNoNode) {
				kit.Lose(lease, h, g, "the key's node was deleted") // behind the lease's back: make it again
				continue
			}
			return v, err
		}
		_, found, err := kit.Acquire(ctx, lease, h, func(ctx context.Context, ep *zookeeper.Epoch) (*leasedKey, error) {
			return k.create(ctx, ep, lease, key, data, contentType, version)
		})
		if found {
			continue // made by another request of the lease meanwhile: write it in place
		}
		if err == nil {
			k.metrics.writes.WithLabelValues("written").Inc()
		}
		return 0, err
	}
}

// create makes key's ephemeral node for lease; the key must be absent.
func (k *Store) create(ctx context.Context, ep *zookeeper.Epoch, lease *kit.Lease, key string, data []byte, contentType string, version *int32) (*leasedKey, error) {
	if err := k.ensureDirs(ctx, ep, contentType); err != nil {
		return nil, err
	}
	if version != nil && *version != Absent {
		return nil, k.refused(ctx, ep, key, zookeeper.ErrBadVersion)
	}
	if _, err := k.write(ctx, ep, key, data, contentType, true, zookeeper.Ephemeral, 0); err != nil {
		return nil, k.refused(ctx, ep, key, err)
	}
	g := &leasedKey{k: k, key: key, lease: lease, ep: ep}
	if ok, st, err := ep.Exists(ctx, k.node(key)); err == nil && ok && st.EphemeralOwner == ep.ID() {
		g.czxid = st.Czxid
	}
	k.mu.Lock()
	if k.leased[key] == nil { // else a stale holding, whose node was deleted elsewhere
		k.metrics.leased.Inc()
	}
	k.leased[key] = g
	k.mu.Unlock()
	return g, nil
}

// Adopt makes the leased key h of lease its own again after a restart (a
// kit.Adopter): its one saved node is the key's node, an ephemeral node of the
// lease's (resumed) session. The node is kept as it is: the key keeps its
// value, content type and version, and its watchers see no change.
func (k *Store) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	if err := CheckKey(h.Name); err != nil {
		return nil, err
	}
	node := k.node(h.Name)
	if len(h.Nodes) != 1 || h.Nodes[0] != node {
		return nil, fmt.Errorf("key %q: saved nodes %v are not its node %s", h.Name, h.Nodes, node)
	}
	_, st, err := kit.OwnedNode(ctx, lease, node)
	if err != nil {
		return nil, fmt.Errorf("key %q: %w", h.Name, err)
	}
	g := &leasedKey{k: k, key: h.Name, lease: lease, ep: lease.Epoch(), czxid: st.Czxid}
	k.mu.Lock()
	if k.leased[h.Name] == nil {
		k.metrics.leased.Inc()
	}
	k.leased[h.Name] = g
	k.mu.Unlock()
	return g, nil
}

// rewrite writes a key the lease holds, in place (it stays ephemeral).
func (k *Store) rewrite(ctx context.Context, g *leasedKey, data []byte, contentType string, version *int32) (int32, error) {
	if err := g.lease.AwaitConnected(ctx); err != nil {
		return 0, err
	}
	if err := k.ensureDirs(ctx, g.ep, contentType); err != nil {
		return 0, err
	}
	v := int32(-1)
	if version != nil {
		if *version == Absent {
			return 0, k.refused(ctx, g.ep, g.key, zookeeper.ErrNodeExists)
		}
		v = *version
	}
	nv, err := k.write(ctx, g.ep, g.key, data, contentType, false, zookeeper.Persistent, v)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return 0, err
	}
	if version == nil && err == nil {
		k.metrics.writes.WithLabelValues("written").Inc()
		return nv, nil
	}
	return nv, k.refused(ctx, g.ep, g.key, err)
}

// deletedFor ends the hold of whichever lease holds key, as lost: its node was
// deleted through the API (by any client), and the lease is told.
func (k *Store) deletedFor(key string) {
	k.mu.Lock()
	cur := k.leased[key]
	k.mu.Unlock()
	if cur != nil {
		kit.Lose(cur.lease, kit.Hold{Kind: Kind, Name: key}, cur, "the key was deleted")
	}
}

// dropType deletes the key's type node if it is the one made with the
// lease's value node (in the same transaction: same czxid, of the lease's
// session), after the value node was deleted by another hand than the
// lease's: left standing, it would give the key's next value its type, and
// vanish under it when the session ends.
func (g *leasedKey) dropType(ctx context.Context) error {
	ok, st, err := g.ep.Exists(ctx, g.k.meta(g.key))
	if err != nil || !ok || g.czxid == 0 || st.EphemeralOwner != g.ep.ID() || st.Czxid != g.czxid {
		return err
	}
	err = g.ep.Delete(ctx, g.k.meta(g.key), st.Version)
	if errors.Is(err, zookeeper.ErrNoNode) || errors.Is(err, zookeeper.ErrBadVersion) {
		return nil
	}
	return err
}

// HeldNodes is the key's node: deleted by another hand, the lease no longer
// holds the key.
func (g *leasedKey) HeldNodes() []string { return []string{g.k.node(g.key)} }

// Release deletes the key's node if it is still the one the lease made, with
// its type; through a suspension it retries while the session lives.
func (g *leasedKey) Release(ctx context.Context) error {
	k := g.k
	k.mu.Lock()
	if k.leased[g.key] == g {
		delete(k.leased, g.key)
		k.metrics.leased.Dec()
	}
	k.mu.Unlock()
	return g.ep.Settle(ctx, func(ctx context.Context) error {
		for {
			ok, st, err := g.ep.Exists(ctx, k.node(g.key))
			if err != nil {
				return err
			}
			if !ok || st.EphemeralOwner != g.ep.ID() || (g.czxid != 0 && st.Czxid != g.czxid) {
				return g.dropType(ctx) // gone, or not the lease's node any more
			}
			err = k.remove(ctx, g.ep, g.key, st.Version)
			if errors.Is(err, zookeeper.ErrBadVersion) {
				continue // written meanwhile: still the lease's node
			}
			if errors.Is(err, zookeeper.ErrNoNode) {
				return nil
			}
			return err
		}
	})
}
