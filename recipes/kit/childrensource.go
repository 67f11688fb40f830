package kit

import (
	"context"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// ChildrenSource is the Source of a recipe whose state is one directory's
// children (a membership group's members, a service's instances): a watch on
// the children and one on each child's data, each armed again only when it
// fires (Children). S is the recipe's state; the follower publishes *S.
type ChildrenSource[T, S any] struct {
	Children Children[T]
	// View is the state of the children read: Children's Pzxid and Data. It
	// is called under the Watches' lock.
	View func(pzxid int64, data map[string]T) *S
	// Empty is the state with no child vouched for: the recipe's name and an
	// empty list.
	Empty func() *S
	// Marks points at st's version and suspension fields, and counts the
	// children st shows.
	Marks func(st *S) Marks
}

// Marks are the fields of a ChildrenSource's state that Uncertain sets and Same
// compares.
type Marks struct {
	Version   *int64
	Suspended *bool
	Since     *time.Time // when the suspension began; zero when not suspended
	Len       int        // how many children the state shows
}

// Read refreshes the children (arming what w needs) and views them.
func (s *ChildrenSource[T, S]) Read(ctx context.Context, ep *zookeeper.Epoch, w *Watches) (*S, error) {
	if err := s.Children.Refresh(ctx, ep, w); err != nil {
		return nil, err
	}
	var st *S
	w.Do(func() { st = s.View(s.Children.Pzxid, s.Children.Data) })
	return st, nil
}

// Inspect reads the children once, with no watch, on the connected session
// (Session.Await) and views them: a recipe's Inspect of one name (a group
// without a node has no members and version 0).
func (s *ChildrenSource[T, S]) Inspect(ctx context.Context, zs *zookeeper.Session) (*S, error) {
	ep, err := zs.Await(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.Children.ReadOnce(ctx, ep); err != nil {
		return nil, err
	}
	return s.View(s.Children.Pzxid, s.Children.Data), nil
}

// Reset forgets the children read under the previous session.
func (s *ChildrenSource[T, S]) Reset() { s.Children.Reset() }

// Uncertain is the last state, marked suspended, during the first part of a
// suspension; then (or while there is no session) Empty with the last
// version: no child vouched for.
func (s *ChildrenSource[T, S]) Uncertain(last *S, loaded bool, u Uncertainty) *S {
	st := s.Empty()
	if loaded && last != nil {
		*s.Marks(st).Version = *s.Marks(last).Version
		if u.Keep {
			cp := *last
			st = &cp
		}
	}
	m := s.Marks(st)
	*m.Suspended, *m.Since = true, u.Since
	return st
}

// Same tells whether b shows nothing new after a: the same version,
// suspension and number of children.
func (s *ChildrenSource[T, S]) Same(a, b *S) bool {
	ma, mb := s.Marks(a), s.Marks(b)
	return *ma.Suspended == *mb.Suspended && ma.Since.Equal(*mb.Since) &&
		*ma.Version == *mb.Version && ma.Len == mb.Len
}
