package recipes

import (
	"context"
	"fmt"
	"path"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// savedNode is the first step of every Adopter of a hold that lives in one
// protected contender node: h names exactly one node, a protected create
// directly under parent, which the resumed session of lease owns. It returns
// the node as its create had returned it (path, guid, czxid), its data and
// its stat. what names the hold in errors ("lock \"a\"").
func savedNode(ctx context.Context, lease *kit.Lease, h kit.SavedHold, parent, what string) (zookeeper.Created, []byte, *zookeeper.Stat, error) {
	if len(h.Nodes) != 1 || path.Dir(h.Nodes[0]) != parent {
		return zookeeper.Created{}, nil, nil, fmt.Errorf("%s: saved nodes %v are not one node of %s", what, h.Nodes, parent)
	}
	p := h.Nodes[0]
	guid, ok := zookeeper.GUIDOf(path.Base(p))
	if !ok {
		return zookeeper.Created{}, nil, nil, fmt.Errorf("%s: node %s is not a protected create", what, p)
	}
	data, st, err := kit.OwnedNode(ctx, lease, p)
	if err != nil {
		return zookeeper.Created{}, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return zookeeper.Created{Path: p, GUID: guid, Czxid: st.Czxid}, data, st, nil
}

// lineOf lists parent's contender nodes in line (sequence) order.
func lineOf(ctx context.Context, ep *zookeeper.Epoch, parent string) ([]string, error) {
	children, _, err := ep.Children(ctx, parent)
	if err != nil {
		return nil, err
	}
	return zookeeper.SortBySeq(children), nil
}
