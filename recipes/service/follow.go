package service

import (
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// newSource is the kit.Source of one service: its instances' directory
// (kit.ChildrenSource).
func newSource(v *Services, service string) *kit.ChildrenSource[Instance, State] {
	return &kit.ChildrenSource[Instance, State]{
		Children: kit.Children[Instance]{Part: "instances", Dir: v.servicePath(service), Decode: instanceOf},
		View: func(pzxid int64, instances map[string]Instance) *State {
			return view(service, pzxid, instances)
		},
		Empty: func() *State { return &State{Service: service, Instances: []Instance{}} },
		Marks: func(st *State) kit.Marks {
			return kit.Marks{Version: &st.Version, Suspended: &st.Suspended, Since: &st.SuspendedSince, Len: len(st.Instances)}
		},
	}
}
