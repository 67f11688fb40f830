package kv

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Keys in a hierarchy: a key may contain "/" ("config/app/db"), each segment
// a name; it is stored as nested nodes, kv/config/app/db, as Curator, kazoo and
// zkCli read a config tree. Every node under kv/ is a key: a node made only as
// a parent holds an empty value, as Curator's creatingParentsIfNeeded and
// kazoo's makepath make them.

// MaxSegments is the most segments a key has.
const MaxSegments = 8

// CheckKey returns an error wrapping kit.ErrInvalidName unless key is one to
// eight names joined by "/".
func CheckKey(key string) error {
	segs := strings.Split(key, "/")
	if len(segs) > MaxSegments {
		return fmt.Errorf("key %q: %d segments, above the maximum of %d: %w", key, len(segs), MaxSegments, kit.ErrInvalidName)
	}
	if len(segs) == 1 {
		return kit.CheckName("key", key)
	}
	for _, s := range segs {
		if !kit.ValidName(s) {
			return fmt.Errorf("key %q: segment %q is not a name: %w", key, s, kit.ErrInvalidName)
		}
	}
	return nil
}

// makeParents creates the missing ancestors of key's node under dir (kv/ or
// kv-meta/) as persistent nodes with empty data.
func (k *Store) makeParents(ctx context.Context, ep *zookeeper.Epoch, dir, key string) error {
	segs := strings.Split(key, "/")
	p := dir
	for _, s := range segs[:len(segs)-1] {
		p += "/" + s
		_, err := ep.Create(ctx, p, []byte{}, zookeeper.Persistent) // empty, not null: as Curator and kazoo make parents
		switch {
		case errors.Is(err, zookeeper.ErrNoChildrenForEphemerals):
			return fmt.Errorf("key %q: %w", key, ErrLeasedParent)
		case err != nil && !errors.Is(err, zookeeper.ErrNodeExists):
			return fmt.Errorf("create %s: %w", p, err)
		}
	}
	return nil
}

// Names lists the keys whose full key starts with prefix, sorted. With
// recursive, every key of the tree under it; without, the keys one level
// below the prefix's last "/" (prefix "config/" lists config/app, not
// config/app/db; a prefix without "/" lists the top-level keys).
func (k *Store) Names(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	ep, err := k.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	if !recursive {
		parent := ""
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			parent = prefix[:i]
			if CheckKey(parent) != nil {
				return []string{}, nil
			}
		}
		children, err := k.children(ctx, ep, parent)
		if err != nil {
			return nil, err
		}
		out := []string{}
		for _, c := range children {
			if full := join(parent, c); strings.HasPrefix(full, prefix) {
				out = append(out, full)
			}
		}
		return out, nil
	}
	out := []string{}
	if err := k.walk(ctx, ep, "", prefix, 0, func(key string) { out = append(out, key) }); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

func join(parent, child string) string {
	if parent == "" {
		return child
	}
	return parent + "/" + child
}

// children are the valid names under key's node ("": kv/ itself), sorted;
// none when it is absent.
func (k *Store) children(ctx context.Context, ep *zookeeper.Epoch, key string) ([]string, error) {
	dir := k.dir
	if key != "" {
		dir = k.node(key)
	}
	children, _, err := ep.Children(ctx, dir)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	children = slices.DeleteFunc(children, func(c string) bool { return !kit.ValidName(c) })
	slices.Sort(children)
	return children, nil
}

// walk calls fn with every key under key ("": every key) whose full key
// starts with prefix, reading the children only of the nodes whose subtree
// may hold such keys, down to MaxSegments; the children of one node's
// children are read at once (pipelined).
func (k *Store) walk(ctx context.Context, ep *zookeeper.Epoch, key, prefix string, depth int, fn func(string)) error {
	if depth == MaxSegments {
		return nil
	}
	children, err := k.children(ctx, ep, key)
	if err != nil {
		return err
	}
	return k.walkKnown(ctx, ep, key, children, prefix, depth, fn)
}

// walkKnown is walk once key's children are known.
func (k *Store) walkKnown(ctx context.Context, ep *zookeeper.Epoch, key string, children []string, prefix string, depth int, fn func(string)) error {
	var deeper []string
	for _, c := range children {
		full := join(key, c)
		if strings.HasPrefix(full, prefix) {
			fn(full)
		}
		if under := full + "/"; depth+1 < MaxSegments && (strings.HasPrefix(under, prefix) || strings.HasPrefix(prefix, under)) {
			deeper = append(deeper, full)
		}
	}
	grand := make([][]string, len(deeper))
	fns := make([]func() error, len(deeper))
	for i, full := range deeper {
		fns[i] = func() (err error) {
			grand[i], err = k.children(ctx, ep, full)
			return err
		}
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return err
	}
	for i, full := range deeper {
		if len(grand[i]) == 0 {
			continue
		}
		if err := k.walkKnown(ctx, ep, full, grand[i], prefix, depth+1, fn); err != nil {
			return err
		}
	}
	return nil
}

// DeleteTree deletes key and every key under it (their types too), deepest
// first; a leased key among them is no longer its lease's. ErrKeyNotFound when
// key has no node. Keys made under it while it runs are deleted too (it walks
// the tree again when a delete finds new children).
func (k *Store) DeleteTree(ctx context.Context, key string) (int, error) {
	if err := CheckKey(key); err != nil {
		return 0, err
	}
	ep, err := k.s.Await(ctx)
	if err != nil {
		return 0, err
	}
	deleted := 0
	for attempt := 0; ; attempt++ {
		var keys []string
		if err := k.walk(ctx, ep, key, "", strings.Count(key, "/")+1, func(n string) { keys = append(keys, n) }); err != nil {
			return deleted, err
		}
		// Deepest first: a key after every key under it.
		slices.SortFunc(keys, func(a, b string) int { return strings.Count(b, "/") - strings.Count(a, "/") })
		keys = append(keys, key)
		again := false
		for i, n := range keys {
			err := k.remove(ctx, ep, n, -1)
			switch {
			case errors.Is(err, zookeeper.ErrNoNode):
				if i == len(keys)-1 && deleted == 0 {
					return 0, fmt.Errorf("key %q: %w", key, ErrKeyNotFound)
				}
				continue
			case errors.Is(err, zookeeper.ErrNotEmpty) && attempt < 10:
				again = true // keys made meanwhile: walk again
				continue
			case err != nil:
				return deleted, err
			}
			deleted++
			k.metrics.writes.WithLabelValues("deleted").Inc()
			k.deletedFor(n)
		}
		if !again {
			break
		}
	}
	// Types left under the key by keys another client deleted.
	return deleted, k.dropTypes(ctx, ep, k.meta(key))
}

// dropTypes deletes the type nodes under (and at) p, deepest first; gone
// ones are fine.
func (k *Store) dropTypes(ctx context.Context, ep *zookeeper.Epoch, p string) error {
	children, _, err := ep.Children(ctx, p)
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := k.dropTypes(ctx, ep, path.Join(p, c)); err != nil {
			return err
		}
	}
	err = ep.Delete(ctx, p, -1)
	if errors.Is(err, zookeeper.ErrNoNode) || errors.Is(err, zookeeper.ErrNotEmpty) {
		return nil
	}
	return err
}

// Entry is a key as a list shows it: its version and size, and its value
// when asked for.
type Entry struct {
	Info
	// Value is the value's bytes, read only when asked for (else nil).
	Value []byte
}

// ReadEach reads keys at once (pipelined on the session's connection: about
// one round trip for all): with values each key's value, else its version
// and size. A key without a node has a nil entry.
func (k *Store) ReadEach(ctx context.Context, keys []string, values bool) ([]*Entry, error) {
	out := make([]*Entry, len(keys))
	fns := make([]func() error, len(keys))
	for i, key := range keys {
		fns[i] = func() error {
			if values {
				v, err := k.Get(ctx, key)
				if err == nil {
					out[i] = &Entry{Info: Info{Key: key, Version: v.Version, Size: int32(len(v.Data))}, Value: v.Data}
				}
				if errors.Is(err, ErrKeyNotFound) {
					return nil
				}
				return err
			}
			st, err := k.Stat(ctx, key)
			if err == nil {
				out[i] = &Entry{Info: *st}
			}
			if errors.Is(err, ErrKeyNotFound) {
				return nil
			}
			return err
		}
	}
	return out, zookeeper.Parallel(fns...)
}
