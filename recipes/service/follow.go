package service

import (
	"context"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// source is the kit.Source of one service: a watch on its children and one on
// each instance's data, each re-armed only when it fires (kit.Children).
type source struct {
	service   string
	instances kit.Children[Instance]
}

func newSource(v *Services, service string) *source {
	return &source{service: service, instances: kit.Children[Instance]{
		Part: "instances", Dir: v.servicePath(service),
		Decode: instanceOf,
	}}
}

func (s *source) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*State, error) {
	if err := s.instances.Refresh(ctx, ep, w); err != nil {
		return nil, err
	}
	var st *State
	w.Do(func() { st = view(s.service, s.instances.Pzxid, s.instances.Data) })
	return st, nil
}

func (s *source) Reset() { s.instances.Reset() }

// Uncertain is the last state, marked suspended, during the first part of a
// suspension; then (or while there is no session) the service with no
// instance vouched for.
func (s *source) Uncertain(last *State, loaded bool, u kit.Uncertainty) *State {
	st := &State{Service: s.service, Instances: []Instance{}}
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
		a.Version == b.Version && len(a.Instances) == len(b.Instances)
}
