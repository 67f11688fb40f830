package group

import (
	"context"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// source is the kit.Source of one group: a watch on its children and one on
// each member's data, each re-armed only when it fires (kit.Children).
type source struct {
	group   string
	members kit.Children[Member]
}

func newSource(g *Groups, group string) *source {
	return &source{group: group, members: kit.Children[Member]{
		Part: "members", Dir: g.groupPath(group),
		Decode: func(n string, data []byte, st *zookeeper.Stat) (Member, bool) {
			return memberOf(n, data, st), kit.ValidName(n)
		},
	}}
}

func (s *source) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*State, error) {
	if err := s.members.Refresh(ctx, ep, w); err != nil {
		return nil, err
	}
	var st *State
	w.Do(func() { st = view(s.group, s.members.Pzxid, s.members.Data) })
	return st, nil
}

func (s *source) Reset() { s.members.Reset() }

// Uncertain is the last state, marked suspended, during the first part of a
// suspension; then (or while there is no session) the group with no member
// vouched for.
func (s *source) Uncertain(last *State, loaded bool, u kit.Uncertainty) *State {
	st := &State{Group: s.group, Members: []Member{}}
	if loaded && last != nil {
		st.Version = last.Version
		if u.Keep {
			cp := *last
			st = &cp
		}
	}
	st.Suspended, st.SuspendedSince = true, u.Since
	return st
}

func (s *source) Same(a, b *State) bool {
	return a.Suspended == b.Suspended && a.SuspendedSince.Equal(b.SuspendedSince) &&
		a.Version == b.Version && len(a.Members) == len(b.Members)
}
