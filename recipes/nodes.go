package recipes

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

var openACL = zk.WorldACL(zk.PermAll)

// ensurePersistent creates p and its missing ancestors as persistent nodes.
func ensurePersistent(ctx context.Context, ep *epoch, p string) error {
	if _, ok := ep.s.knownPaths.Load(p); ok || p == "/" || p == "" {
		return nil
	}
	if err := ensurePersistent(ctx, ep, path.Dir(p)); err != nil {
		return err
	}
	err := ep.call(ctx, func(c *zk.Conn) error {
		_, err := c.Create(p, nil, zk.FlagPersistent, openACL)
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	ep.s.knownPaths.Store(p, true)
	return nil
}

// createIn creates p with flags, first making its missing ancestors persistent
// when the create finds no parent. Other errors (ErrNodeExists among them) are
// returned as they come.
func createIn(ctx context.Context, ep *epoch, p string, data []byte, flags int32) error {
	for {
		err := ep.call(ctx, func(c *zk.Conn) error {
			_, err := c.Create(p, data, flags, openACL)
			return err
		})
		if !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		ep.s.knownPaths.Delete(path.Dir(p)) // deleted behind the cache
		if err := ensurePersistent(ctx, ep, path.Dir(p)); err != nil {
			return err
		}
	}
}

// ensureContainer creates p as a container node (ZooKeeper deletes it once its last
// child is gone), and its missing ancestors as persistent nodes.
func ensureContainer(ctx context.Context, ep *epoch, p string) error {
	if err := ensurePersistent(ctx, ep, path.Dir(p)); err != nil {
		return err
	}
	err := ep.call(ctx, func(c *zk.Conn) error {
		_, err := c.CreateContainer(p, nil, zk.FlagContainer, openACL)
		return err
	})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", p, err)
	}
	return nil
}

// newGUID returns a random UUID (version 4) as Curator's protected mode uses.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// protectedPrefix is the child-name prefix of a protected create: "_c_<guid>-".
func protectedPrefix(guid string) string { return "_c_" + guid + "-" }

// created is a node made by createProtected.
type created struct {
	// Path is the node's full path.
	Path string
	// Czxid is the node's creation zxid, and Alone tells that the node was its
	// parent's only child just after the create. Both are known only from a
	// stamped create whose answer came (Czxid 0 otherwise).
	Czxid int64
	Alone bool
}

// createProtected creates the ephemeral sequential node
// parent/_c_<guid>-<infix><seq> under ep's session, creating parent as a container
// when missing. When the create's answer is lost with the connection, it waits for
// the same session to come back and adopts the node it finds by its guid, but only
// if that node's ephemeral owner is this session; a lost session is ErrSessionLost.
//
// A stamped create sends, in one transaction with the create, a write of empty
// data to parent: every change of one transaction carries its zxid, so the
// parent's stat in the answer tells the node's czxid (the parent's new mzxid) and
// whether the node is alone under parent (its child count), without a second
// request. Only parents whose data is the sidecar's own (the lines of locks and
// elections, always empty) are stamped, and only where the parent's ACL lets
// this session write it.
func createProtected(ctx context.Context, ep *epoch, parent, guid, infix string, data []byte, stamp bool) (created, error) {
	want := parent + "/" + protectedPrefix(guid) + infix
	for {
		var c created
		create := &zk.CreateRequest{Path: want, Data: data, Acl: openACL, Flags: zk.FlagEphemeralSequential}
		if _, ok := ep.s.unstamped.Load(parent); ok {
			stamp = false
		}
		ops := []any{create}
		if stamp {
			ops = append(ops, &zk.SetDataRequest{Path: parent, Data: nil, Version: -1})
		}
		// Keyed by parent: siblings made in one transaction would share a czxid.
		res, err := ep.multi(ctx, parent, ops...)
		if stamp && errors.Is(err, zk.ErrNoAuth) {
			// A parent made by someone else may let us create but not write:
			// create without the stamp there (the czxid is then read).
			ep.s.unstamped.Store(parent, true)
			continue
		}
		if err == nil {
			c.Path = res[0].String
			if stamp {
				if st := res[1].Stat; st != nil {
					c.Czxid, c.Alone = st.Mzxid, st.NumChildren == 1
				}
			}
		}
		switch {
		case err == nil:
			return c, nil
		case errors.Is(err, zk.ErrNoNode):
			if err := ensureContainer(ctx, ep, parent); err != nil {
				return created{}, err
			}
			continue
		case errors.Is(err, ErrUnavailable) && ctx.Err() == nil:
			if err := waitConnected(ctx, ep); err != nil {
				return created{}, err
			}
			found, err := findProtected(ctx, ep, parent, guid)
			if err != nil {
				return created{}, err
			}
			if found != "" {
				return created{Path: found}, nil
			}
			continue // the create never happened: try again
		default:
			return created{}, fmt.Errorf("create under %s: %w", parent, err)
		}
	}
}

// findProtected returns the child of parent made by the protected create with this
// guid and owned by ep's session, or "" when there is none.
func findProtected(ctx context.Context, ep *epoch, parent, guid string) (string, error) {
	var children []string
	err := ep.call(ctx, func(c *zk.Conn) error {
		var err error
		children, _, err = c.Children(parent)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	prefix := protectedPrefix(guid)
	for _, ch := range children {
		if !strings.HasPrefix(ch, prefix) {
			continue
		}
		p := parent + "/" + ch
		var st *zk.Stat
		err := ep.call(ctx, func(c *zk.Conn) error {
			var err error
			_, st, err = c.Exists(p)
			return err
		})
		if err != nil {
			return "", err
		}
		if st != nil && st.EphemeralOwner == ep.id.Load() {
			return p, nil
		}
	}
	return "", nil
}

// waitConnected blocks until ep's session is connected again, ep is lost
// (ErrSessionLost) or ctx ends.
func waitConnected(ctx context.Context, ep *epoch) error {
	for {
		changed := ep.s.Changed()
		cur, err := ep.s.current()
		if cur == ep {
			return nil
		}
		if ep.isLost() || errors.Is(err, ErrClosed) {
			return ErrSessionLost
		}
		select {
		case <-changed:
		case <-ep.lost:
			return ErrSessionLost
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}

// deleteProtected removes the node this guid created under parent (known: its path,
// or "" if the create's answer never came), retrying through a suspension for as
// long as the session lives, whatever ctx says: a node left behind would stand in
// its line until the session ends, and a successor may have been handed the lock
// already (handoffs). ctx carries values only. Nothing is left to do when the
// session is lost: its ephemerals are gone.
func deleteProtected(ctx context.Context, ep *epoch, parent, guid, known string) error {
	ctx = context.WithoutCancel(ctx)
	for {
		p := known
		var err error
		if p == "" {
			p, err = findProtected(ctx, ep, parent, guid)
		}
		if err == nil && p != "" {
			_, err = ep.multi(ctx, "", &zk.DeleteRequest{Path: p, Version: -1})
		}
		switch {
		case err == nil, errors.Is(err, zk.ErrNoNode), errors.Is(err, ErrSessionLost):
			return nil
		case errors.Is(err, ErrUnavailable):
			if err := waitConnected(ctx, ep); err != nil {
				return nil
			}
		default:
			return err
		}
	}
}

// cleanupProtected deletes a protected node that must not outlive a failed or
// abandoned operation (see deleteProtected).
func cleanupProtected(ep *epoch, parent, guid, node string) {
	_ = deleteProtected(context.Background(), ep, parent, guid, node)
}

// seqOf returns the 10-digit sequence suffix of a sequential node's name. Names
// without one (not contenders) report ok == false.
func seqOf(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-10:], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// sortBySeq keeps the sequential children and orders them by their suffix,
// whatever their prefix (Curator's _c_<guid>-lock-, kazoo's <uuid>__lock__, ...).
func sortBySeq(children []string) []string {
	out := children[:0:0]
	for _, c := range children {
		if _, ok := seqOf(c); ok {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, _ := seqOf(out[i])
		b, _ := seqOf(out[j])
		return a < b
	})
	return out
}
