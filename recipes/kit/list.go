package kit

import (
	"context"
	"errors"
	"sort"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// ListNames lists the valid names under one recipe's directory, sorted. A
// missing directory is an empty list. It reads one directory: use it for listings
// and status pages, not on a hot path.
func ListNames(ctx context.Context, s *zookeeper.Session, dir string) ([]string, error) {
	ep, err := s.Current()
	if err != nil {
		return nil, err
	}
	children, _, err := ep.Children(ctx, dir)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	names := children[:0]
	for _, c := range children {
		if ValidName(c) {
			names = append(names, c)
		}
	}
	sort.Strings(names)
	return names, nil
}
