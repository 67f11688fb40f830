package group

import (
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// newSource is the kit.Source of one group: its members' directory
// (kit.ChildrenSource).
func newSource(g *Groups, group string) *kit.ChildrenSource[Member, State] {
	return &kit.ChildrenSource[Member, State]{
		Children: kit.Children[Member]{Part: "members", Dir: g.groupPath(group),
			Decode: func(n string, data []byte, st *zookeeper.Stat) (Member, bool) {
				return memberOf(n, data, st), kit.ValidName(n)
			},
		},
		View: func(pzxid int64, members map[string]Member) *State {
			return view(group, pzxid, members)
		},
		Empty: func() *State { return &State{Group: group, Members: []Member{}} },
		Marks: func(st *State) kit.Marks {
			return kit.Marks{Version: &st.Version, Suspended: &st.Suspended, Since: &st.SuspendedSince, Len: len(st.Members)}
		},
	}
}
