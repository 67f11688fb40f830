package kit

import (
	"context"
	"errors"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// TreeSource is a Source that follows one name's subtree for a reader that has no
// Source of its own (a queue's length, a barrier's count): it keeps a children
// watch on the name's node and on each node below it that Deeper accepts, and
// reads the state with its read function once they are armed. Any change to the
// children of a watched node, the name's node deleted, or the name's node
// created when it was missing (an existence watch) makes the follower read
// again; a change anywhere else (data, the children of a node Deeper refused)
// does not. A node below the name that is missing is not watched: its parent's
// children watch tells when it appears.
type TreeSource[S any] struct {
	path   string
	deeper func(rel string) bool
	read   func(ctx context.Context) (S, error)
	same   func(a, b S) bool
	// children are each watched node's children as last listed (by path).
	children map[string][]string
}

// NewTreeSource follows the subtree at path: deeper (nil: none) accepts the
// nodes below it to watch too, by their path relative to path ("p00",
// "p00/b0000000001"), and is asked only of the children of a watched node;
// read reads the state after the watches are armed (it reads ZooKeeper on its
// own); same tells whether b shows nothing new after a. While the session is
// not connected the last state stands.
func NewTreeSource[S any](path string, deeper func(rel string) bool, read func(ctx context.Context) (S, error), same func(a, b S) bool) *TreeSource[S] {
	return &TreeSource[S]{path: path, deeper: deeper, read: read, same: same}
}

// Read arms the watches that are not armed, then reads the state.
func (t *TreeSource[S]) Read(ctx context.Context, ep *zookeeper.Epoch, w *Watches) (S, error) {
	listed := map[string][]string{}
	if err := t.watch(ctx, ep, w, t.path, "", listed); err != nil {
		var zero S
		return zero, err
	}
	t.children = listed
	return t.read(ctx)
}

// watch arms the children watch of p (rel below the name) unless armed, and
// goes on below it where deeper says so.
func (t *TreeSource[S]) watch(ctx context.Context, ep *zookeeper.Epoch, w *Watches, p, rel string, listed map[string][]string) error {
	kids, known := t.children[p]
	if w.Need(p) || !known {
		var ch <-chan zookeeper.Event
		var err error
		kids, _, ch, err = ep.ChildrenW(ctx, p)
		switch {
		case errors.Is(err, zookeeper.ErrNoNode) && rel != "":
			return nil // its parent's watch tells when it is back
		case errors.Is(err, zookeeper.ErrNoNode):
			return WatchAbsent(ctx, ep, w, p, p, nil)
		case err != nil:
			return err
		}
		w.Armed(p, ch, nil)
	}
	listed[p] = kids
	if t.deeper == nil {
		return nil
	}
	for _, k := range kids {
		r := k
		if rel != "" {
			r = rel + "/" + k
		}
		if t.deeper(r) {
			if err := t.watch(ctx, ep, w, p+"/"+k, r, listed); err != nil {
				return err
			}
		}
	}
	return nil
}

// Reset forgets the children listed: the watches are gone.
func (t *TreeSource[S]) Reset() { t.children = nil }

// Uncertain keeps the last state.
func (t *TreeSource[S]) Uncertain(last S, _ bool, _ Uncertainty) S { return last }

// Same is the same function given to NewTreeSource.
func (t *TreeSource[S]) Same(a, b S) bool { return t.same(a, b) }
