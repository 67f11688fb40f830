package kit

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// Children is a Source's cache of one directory's children and of each
// child's data, kept current by one watch on the list and one on each child's
// data, each armed again only when it fires. Its fields are guarded by the
// Watches' lock (read them in w.Do).
type Children[T any] struct {
	// Part names the watches: Part for the list, Part+"/"+child for a child's data.
	Part string
	Dir  string
	// Decode turns a child's data into what is cached; false leaves it out (a
	// node that is not a child of the recipe's).
	Decode func(name string, data []byte, st *zookeeper.Stat) (T, bool)

	// Names are the children listed (the directory's order), Pzxid the zxid of
	// the directory's last change of children (0 when it does not exist), Data
	// the decoded children read so far.
	Names []string
	Pzxid int64
	Data  map[string]T
}

// Reset forgets what was read (a new session: the watches are gone).
func (c *Children[T]) Reset() { c.Names, c.Pzxid, c.Data = nil, 0, map[string]T{} }

// Refresh reads the list again when its watch fired (or was never armed),
// then the data of every listed child not read yet (pipelined).
func (c *Children[T]) Refresh(ctx context.Context, ep *zookeeper.Epoch, w *Watches) error {
	if c.Data == nil {
		w.Do(func() { c.Data = map[string]T{} })
	}
	if w.Need(c.Part) {
		names, st, ch, err := ep.ChildrenW(ctx, c.Dir)
		switch {
		case errors.Is(err, zookeeper.ErrNoNode):
			err = WatchAbsent(ctx, ep, w, c.Part, c.Dir, func() { c.Names, c.Pzxid = nil, 0; clear(c.Data) })
		case err == nil:
			keep := make(map[string]bool, len(names))
			for _, n := range names {
				keep[n] = true
			}
			w.Do(func() {
				c.Names, c.Pzxid = names, st.Pzxid
				maps.DeleteFunc(c.Data, func(n string, _ T) bool { return !keep[n] })
			})
			w.Armed(c.Part, ch, nil)
		}
		if err != nil {
			return err
		}
	}
	var missing []string
	w.Do(func() {
		for _, n := range c.Names {
			if w.needLocked(c.Part + "/" + n) {
				missing = append(missing, n)
			}
		}
	})
	fns := make([]func() error, 0, len(missing))
	for _, n := range missing {
		fns = append(fns, func() error { return c.readChild(ctx, ep, w, n) })
	}
	return zookeeper.Parallel(fns...)
}

func (c *Children[T]) readChild(ctx context.Context, ep *zookeeper.Epoch, w *Watches, n string) error {
	data, st, ch, err := ep.GetW(ctx, c.Dir+"/"+n)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil // the list's watch reports it
	}
	if err != nil {
		return err
	}
	v, ok := c.Decode(n, data, st)
	w.Do(func() {
		switch {
		case !slices.Contains(c.Names, n):
		case ok:
			c.Data[n] = v
		default:
			delete(c.Data, n)
		}
	})
	// A fired watch keeps the data cached until it is read again, so that a
	// change never shows the child missing for a moment.
	w.Armed(c.Part+"/"+n, ch, nil)
	return nil
}

// ReadOnce fills c with the directory as it is now, arming no watch: the list,
// then every child's data (pipelined), decoded; a child deleted in between is
// left out, and a directory that does not exist reads as empty (Pzxid 0). It is
// the one-off read (a recipe's Inspect) of what a Source following c keeps.
func (c *Children[T]) ReadOnce(ctx context.Context, ep *zookeeper.Epoch) error {
	c.Reset()
	names, st, err := ep.Children(ctx, c.Dir)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	c.Names, c.Pzxid = names, st.Pzxid
	read := make([]*T, len(names))
	fns := make([]func() error, 0, len(names))
	for i, n := range names {
		fns = append(fns, func() error {
			data, st, err := ep.Get(ctx, c.Dir+"/"+n)
			if errors.Is(err, zookeeper.ErrNoNode) {
				return nil // deleted since the list
			}
			if err != nil {
				return err
			}
			if v, ok := c.Decode(n, data, st); ok {
				read[i] = &v
			}
			return nil
		})
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return err
	}
	for i, v := range read {
		if v != nil {
			c.Data[names[i]] = *v
		}
	}
	return nil
}
