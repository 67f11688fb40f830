package line

import (
	"context"
	"errors"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Reading lines for followers and inspections: the locks', semaphores' and
// read/write locks' sources list a parent (watching it) and read the data of
// the nodes they show, once per node: the data of a contender node never
// changes after its create.

// ChildrenPart names a source's children watch among its kit.Watches.
const ChildrenPart = "children"

// WatchedChildren lists parent. With w, it arms a children watch named part
// when w needs one; while parent does not exist it watches for its appearance
// instead and answers no children (nil stat).
func WatchedChildren(ctx context.Context, ep *zookeeper.Epoch, parent, part string, w *kit.Watches) ([]string, *zookeeper.Stat, error) {
	if w == nil || !w.Need(part) {
		children, st, err := ep.Children(ctx, parent)
		if errors.Is(err, zookeeper.ErrNoNode) {
			return nil, nil, nil
		}
		return children, st, err
	}
	children, st, ch, err := ep.ChildrenW(ctx, parent)
	if err == nil {
		w.Armed(part, ch, nil)
		return children, st, nil
	}
	if !errors.Is(err, zookeeper.ErrNoNode) {
		return nil, nil, err
	}
	ok, _, ch, err := ep.ExistsW(ctx, parent)
	switch {
	case err != nil:
		return nil, nil, err
	case ok:
		w.Poke() // created meanwhile: read it (and watch its children) now
	default:
		w.Armed(part, ch, nil) // fires when the parent appears
	}
	return nil, nil, nil
}

// NodeInfo is what a line's reader shows of one node.
type NodeInfo struct {
	Data  string
	Czxid int64
	Since time.Time
}

// NodeCache remembers the nodes of one parent that were read. Its zero value
// is an empty cache (a one-off inspection); a follower's source keeps one.
type NodeCache struct {
	m map[string]NodeInfo
}

// Read returns the info of each named child of parent, reading (in parallel)
// those not cached; a node deleted meanwhile is left out. The cache then holds
// the named nodes only.
func (c *NodeCache) Read(ctx context.Context, ep *zookeeper.Epoch, parent string, names []string) (map[string]NodeInfo, error) {
	out := make(map[string]NodeInfo, len(names))
	var missing []string
	for _, n := range names {
		if in, ok := c.m[n]; ok {
			out[n] = in
		} else {
			missing = append(missing, n)
		}
	}
	nodes, err := ep.GetEach(ctx, parent, missing)
	if err != nil {
		return nil, err
	}
	for i, n := range missing {
		if st := nodes[i].Stat; st != nil {
			out[n] = NodeInfo{Data: string(nodes[i].Data), Czxid: st.Czxid, Since: time.UnixMilli(st.Ctime).UTC()}
		}
	}
	c.m = out
	return out, nil
}

// Reset forgets every node (a new session: re-read).
func (c *NodeCache) Reset() { c.m = nil }

// Pzxid is a listing's newest child change (0 without a stat).
func Pzxid(st *zookeeper.Stat) int64 {
	if st == nil {
		return 0
	}
	return st.Pzxid
}
