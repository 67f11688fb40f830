package lock

import (
	"context"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/line"
)

// Follow follows lock name: however many followers a lock has on this sidecar
// (event streams, the overview), the sidecar holds one ZooKeeper watch for it
// (on its contenders) and one cached state, read again after every change and
// every reconnect. Its state changes with the holder or the number of waiters.
// While the session is suspended the last state read stays, marked suspended,
// until the session could have expired (then nobody is shown holding it).
// Close the follower when done.
func (l *Locks) Follow(name string) (*kit.Follower[*LockState], error) {
	return l.followers.FollowName("lock", name)
}

// lockSource reads one lock for its follower.
type lockSource struct {
	l     *Locks
	name  string
	cache line.NodeCache
}

func (s *lockSource) Read(ctx context.Context, ep *zookeeper.Epoch, w *kit.Watches) (*LockState, error) {
	parent := s.l.parent(s.name)
	children, st, err := line.WatchedChildren(ctx, ep, parent, line.ChildrenPart, w)
	if err != nil {
		return nil, err
	}
	order := zookeeper.SortBySeq(children)
	out := &LockState{Name: s.name, Zxid: line.Pzxid(st)}
	for len(order) > 0 {
		infos, err := s.cache.Read(ctx, ep, parent, order[:1])
		if err != nil {
			return nil, err
		}
		if in, ok := infos[order[0]]; ok {
			out.Holder = &LockHolder{Owner: in.Data, FencingToken: in.Czxid, Since: s.l.since(parent, order, in.Since)}
			out.Waiters = len(order) - 1
			break
		}
		order = order[1:] // released meanwhile: the watch reports it
	}
	return out, nil
}

func (s *lockSource) Reset() { s.cache.Reset() }

func (s *lockSource) Uncertain(last *LockState, loaded bool, u kit.Uncertainty) *LockState {
	st := &LockState{Name: s.name}
	if loaded && last != nil {
		if u.Keep {
			cp := *last
			st = &cp
		}
		st.Zxid = last.Zxid
	}
	st.Suspended, st.SuspendedSince = true, u.Since
	return st
}

func (s *lockSource) Same(a, b *LockState) bool {
	if a == nil || b == nil || a.Waiters != b.Waiters || (a.Holder == nil) != (b.Holder == nil) ||
		a.Suspended != b.Suspended || !a.SuspendedSince.Equal(b.SuspendedSince) {
		return false
	}
	return a.Holder == nil || *a.Holder == *b.Holder
}
