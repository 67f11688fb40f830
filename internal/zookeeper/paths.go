package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/coord-sidecar/coord-sidecar/internal/guid"
)

// EnsurePersistent creates p and its missing ancestors as persistent nodes. Paths
// known to exist are remembered (the sidecar never deletes a persistent parent),
// so the hot path does not create them again.
func (ep *Epoch) EnsurePersistent(ctx context.Context, p string) error {
	if _, ok := ep.s.knownPaths.Load(p); ok || p == "/" || p == "" {
		return nil
	}
	if err := ep.EnsurePersistent(ctx, path.Dir(p)); err != nil {
		return err
	}
	_, err := ep.Create(ctx, p, nil, Persistent)
	if err != nil && !errors.Is(err, ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	ep.s.knownPaths.Store(p, true)
	return nil
}

// CreateIn creates p with mode, first making its missing ancestors persistent
// when the create finds no parent. Other errors (ErrNodeExists among them) are
// returned as they come.
func (ep *Epoch) CreateIn(ctx context.Context, p string, data []byte, mode int32) error {
	for {
		_, err := ep.CreateChecked(ctx, p, data, mode)
		if !errors.Is(err, ErrNoNode) {
			return err
		}
		ep.s.knownPaths.Delete(path.Dir(p)) // deleted behind the cache
		if err := ep.EnsurePersistent(ctx, path.Dir(p)); err != nil {
			return err
		}
	}
}

// EnsureContainer creates p as a container node (ZooKeeper deletes it once its
// last child is gone), and its missing ancestors as persistent nodes.
func (ep *Epoch) EnsureContainer(ctx context.Context, p string) error {
	if err := ep.EnsurePersistent(ctx, path.Dir(p)); err != nil {
		return err
	}
	_, err := ep.Create(ctx, p, nil, Container)
	if err != nil && !errors.Is(err, ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

// NewGUID returns a random UUID (version 4), as Curator's protected mode uses
// (package guid).
func NewGUID() string { return guid.New() }

// ProtectedPrefix is the child-name prefix of a protected create: "_c_<guid>-".
func ProtectedPrefix(guid string) string { return "_c_" + guid + "-" }

// GUIDOf returns the guid of a protected create's child name
// ("_c_<guid>-..."); false for a name without one.
func GUIDOf(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "_c_")
	if !ok || len(rest) < 37 || rest[36] != '-' {
		return "", false
	}
	return rest[:36], true
}

// SeqOf returns the 10-digit sequence suffix of a sequential node's name. Names
// without one (not contenders) report ok == false.
func SeqOf(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-10:], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// SortBySeq keeps the sequential children and orders them by their suffix,
// whatever their prefix (Curator's _c_<guid>-lock-, kazoo's <uuid>__lock__, ...).
func SortBySeq(children []string) []string {
	out := children[:0:0]
	for _, c := range children {
		if _, ok := SeqOf(c); ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := SeqOf(out[i])
		b, _ := SeqOf(out[j])
		return a < b
	})
	return out
}
