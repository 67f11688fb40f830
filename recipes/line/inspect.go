package line

import (
	"context"
	"fmt"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Reader reads the state of a line recipe's thing name under ep: arming its
// watches through w when w is not nil (a follower), reusing what cache holds
// of nodes already read.
type Reader[S any] func(ctx context.Context, ep *zookeeper.Epoch, name string, w *kit.Watches, cache *NodeCache) (S, error)

// Inspect is a line recipe's Inspect of name (a kind's name, checked first):
// under the connected session (zookeeper.Session.Await, which waits through a
// suspension as ctx allows), one read, with no watch and a cache of its own.
func Inspect[S any](ctx context.Context, s *zookeeper.Session, kind, name string, read Reader[S]) (S, error) {
	var zero S
	if err := kit.CheckName(kind, name); err != nil {
		return zero, err
	}
	ep, err := s.Await(ctx)
	if err != nil {
		return zero, err
	}
	return read(ctx, ep, name, nil, &NodeCache{})
}

// Release releases what lease holds as h when it is a T that held accepts (a
// grant's mode, a permit's name): a release that names more than h. Else it
// returns an error wrapping kit.ErrNotHeld that names what the request asked
// to release, and nothing is changed. An implicit lease ends with the release.
func Release[T kit.Holding](ctx context.Context, lease *kit.Lease, h kit.Hold, held func(T) bool, what string) error {
	if v, ok := kit.Lookup[T](lease, h); !ok || !held(v) {
		return fmt.Errorf("%s: %w", what, kit.ErrNotHeld)
	}
	return kit.Release(ctx, lease, h)
}
