package kit

import (
	"context"
	"errors"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// ReadNode reads the data and stat of the node at p for a Source, arming through
// w (under part) a watch that fires when the node is created, changed or
// deleted, unless one is armed already. exists is false (data and stat nil)
// when there is no such node. It is the read of a Source that follows one node
// (a key, a counter).
func ReadNode(ctx context.Context, ep *zookeeper.Epoch, w *Watches, part, p string) (data []byte, st *zookeeper.Stat, exists bool, err error) {
	for {
		if !w.Need(part) {
			data, st, err = ep.Get(ctx, p)
			if errors.Is(err, zookeeper.ErrNoNode) {
				return nil, nil, false, nil
			}
			return data, st, err == nil, err
		}
		var ch <-chan zookeeper.Event
		data, st, ch, err = ep.GetW(ctx, p)
		if err == nil {
			w.Armed(part, ch, nil)
			return data, st, true, nil
		}
		if !errors.Is(err, zookeeper.ErrNoNode) {
			return nil, nil, false, err
		}
		// No node leaves no data watch: watch for its creation instead.
		ok, _, ch, err := ep.ExistsW(ctx, p)
		if err != nil {
			return nil, nil, false, err
		}
		w.Armed(part, ch, nil)
		if !ok {
			return nil, nil, false, nil
		}
		// Created in between: the watch is armed, read its data.
	}
}
