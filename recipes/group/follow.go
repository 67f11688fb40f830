package group

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// source is the kit.Source of one group: a watch on its children and one on
// each member's data, each re-armed only when it fires.
type source struct {
	g     *Groups
	group string
	gp    string

	// Guarded by the Watches' lock (w.Do).
	pzxid   int64
	names   []string
	members map[string]Member
}

const (
	partChildren = "children"
	partMember   = "member/"
)

func (s *source) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*State, error) {
	if w.Need(partChildren) {
		names, st, ch, err := ep.ChildrenW(ctx, s.gp)
		if errors.Is(err, zookeeper.ErrNoNode) {
			err = kit.WatchAbsent(ctx, ep, w, partChildren, s.gp, func() { s.names, s.pzxid = nil, 0 })
		} else if err == nil {
			keep := map[string]bool{}
			for _, n := range names {
				keep[n] = true
			}
			w.Do(func() {
				s.names, s.pzxid = names, st.Pzxid
				maps.DeleteFunc(s.members, func(n string, _ Member) bool { return !keep[n] })
			})
			w.Armed(partChildren, ch, nil)
		}
		if err != nil {
			return nil, err
		}
	}
	var missing []string
	w.Do(func() {
		for _, n := range s.names {
			if _, ok := s.members[n]; !ok && kit.ValidName(n) {
				missing = append(missing, n)
			}
		}
	})
	fns := make([]func() error, 0, len(missing))
	for _, n := range missing {
		fns = append(fns, func() error {
			data, st, ch, err := ep.GetW(ctx, s.gp+"/"+n)
			if errors.Is(err, zookeeper.ErrNoNode) {
				return nil // the children's watch reports it
			}
			if err != nil {
				return err
			}
			m := memberOf(n, data, st)
			w.Do(func() {
				if slices.Contains(s.names, n) {
					s.members[n] = m
				}
			})
			w.Armed(partMember+n, ch, func() { delete(s.members, n) })
			return nil
		})
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return nil, err
	}
	var st *State
	w.Do(func() { st = view(s.group, s.pzxid, s.members) })
	return st, nil
}

func (s *source) Reset() {
	s.pzxid, s.names, s.members = 0, nil, map[string]Member{}
}

func (s *source) Uncertain(last *State, loaded bool) *State {
	st := &State{Group: s.group, Members: []Member{}}
	if loaded && last != nil {
		cp := *last
		st = &cp
	}
	st.Suspended = true
	return st
}

func (s *source) Same(a, b *State) bool {
	if a.Suspended || b.Suspended {
		return a.Suspended && b.Suspended
	}
	return a.Version == b.Version && len(a.Members) == len(b.Members)
}
