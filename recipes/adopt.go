package recipes

import (
	"context"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// lineOf lists parent's contender nodes in line (sequence) order.
func lineOf(ctx context.Context, ep *zookeeper.Epoch, parent string) ([]string, error) {
	children, _, err := ep.Children(ctx, parent)
	if err != nil {
		return nil, err
	}
	return zookeeper.SortBySeq(children), nil
}
