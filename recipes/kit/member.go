package kit

import (
	"context"
	"fmt"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// JoinWeighted is the opening every weighted member's join shares (partition
// groups, throughput groups): the group's and the member's names checked, the
// weight checked against 1..maxWeight (ErrInvalidArgument), then the hold h
// acquired for lease through join. A member the lease already holds under h is
// refused with exists, naming the member and the group; nothing is made then.
func JoinWeighted[T Holding](ctx context.Context, lease *Lease, h Hold, group, id string, weight, maxWeight int64, exists error,
	join func(ctx context.Context, ep *zookeeper.Epoch) (T, error)) (T, error) {
	var none T
	if err := CheckName("group", group); err != nil {
		return none, err
	}
	if err := CheckName("member", id); err != nil {
		return none, err
	}
	if weight < 1 || weight > maxWeight {
		return none, fmt.Errorf("weight %d not in 1..%d: %w", weight, maxWeight, ErrInvalidArgument)
	}
	m, found, err := Acquire(ctx, lease, h, join)
	if err != nil {
		return none, err
	}
	if found {
		return none, fmt.Errorf("member %q of %q: %w", id, group, exists)
	}
	return m, nil
}
