package kit

import (
	"context"
	"errors"
	"slices"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// ListNames lists the valid names under one recipe's directory, sorted. A
// missing directory is an empty list. It reads one directory: use it for listings
// and status pages, not on a hot path.
func ListNames(ctx context.Context, s *zookeeper.Session, dir string) ([]string, error) {
	ep, err := s.Await(ctx)
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
	return validNames(children), nil
}

// validNames keeps the children that are ValidName, sorted, in children's array.
func validNames(children []string) []string {
	names := slices.DeleteFunc(children, func(c string) bool { return !ValidName(c) })
	slices.Sort(names)
	return names
}

// DirSource is a Source of the names in one recipe's directory, as ListNames
// lists them (valid names only, sorted; a missing directory is an empty list),
// kept current by one children watch on the directory, or an existence watch
// while it is missing. While the session is not connected the last list
// stands.
type DirSource struct {
	// Dir is the directory's path.
	Dir string
}

// Read lists the directory, arming its watch unless armed.
func (d *DirSource) Read(ctx context.Context, ep *zookeeper.Epoch, w *Watches) ([]string, error) {
	var kids []string
	var err error
	if w.Need(d.Dir) {
		var ch <-chan zookeeper.Event
		kids, _, ch, err = ep.ChildrenW(ctx, d.Dir)
		if errors.Is(err, zookeeper.ErrNoNode) {
			return []string{}, WatchAbsent(ctx, ep, w, d.Dir, d.Dir, nil)
		}
		if err == nil {
			w.Armed(d.Dir, ch, nil)
		}
	} else {
		kids, _, err = ep.Children(ctx, d.Dir)
	}
	if errors.Is(err, zookeeper.ErrNoNode) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	return validNames(kids), nil
}

// Reset has nothing to forget: the list is read again whole.
func (d *DirSource) Reset() {}

// Uncertain keeps the last list.
func (d *DirSource) Uncertain(last []string, _ bool, _ Uncertainty) []string { return last }

// Same tells whether the two lists are equal.
func (d *DirSource) Same(a, b []string) bool { return slices.Equal(a, b) }
