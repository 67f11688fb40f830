package line

import (
	"context"
	"fmt"
	"slices"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Saved is the start of the Adopter of a contender of a line (a lock's,
// a read/write lock's): kit.ProtectedNode's checks of the saved node under
// parent, then parent's contender nodes in line (sequence) order, for the
// recipe to check that the node still stands where its grant put it.
func Saved(ctx context.Context, lease *kit.Lease, h kit.SavedHold, parent, what string) (zookeeper.Created, []byte, *zookeeper.Stat, []string, error) {
	node, data, st, err := kit.ProtectedNode(ctx, lease, h, parent, what)
	if err != nil {
		return node, nil, nil, nil, err
	}
	children, _, err := lease.Epoch().Children(ctx, parent)
	if err != nil {
		return node, nil, nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	kit.RememberLine(ctx, parent, slices.Clone(children)) // the Restore's sweep reads it
	return node, data, st, zookeeper.SortBySeq(children), nil
}
