package sidecartest

import (
	"errors"
	"path"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/go-zookeeper/zk"
)

// Children lists p's Children (none when p does not exist).
func Children(t *testing.T, conn *zk.Conn, p string) []string {
	t.Helper()
	ch, _, err := conn.Children(p)
	if err == zk.ErrNoNode {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// PlaceCuratorNode creates an ephemeral sequential node under parent as
// Curator's protected mode names it, making the parent's path as needed.
func PlaceCuratorNode(t *testing.T, conn *zk.Conn, parent, infix, data string) string {
	t.Helper()
	for i := 1; i <= len(parent); i++ {
		if i == len(parent) || parent[i] == '/' {
			if _, err := conn.Create(parent[:i], nil, 0, zk.WorldACL(zk.PermAll)); err != nil && err != zk.ErrNodeExists {
				t.Fatal(err)
			}
		}
	}
	p, err := conn.Create(parent+"/_c_"+zookeeper.NewGUID()+"-"+infix, []byte(data), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// LockNodes lists the contender nodes of a lock, straight from ZooKeeper.
func LockNodes(t *testing.T, conn *zk.Conn, root, name string) []string {
	t.Helper()
	return Children(t, conn, path.Join(root, "locks", name))
}

// CloseToOthers makes, under root, a lock parent (locks/closed) and a queue
// (queues/closed) that another ZooKeeper identity closed: all permissions to
// digest other:pw, read only to anyone (so a snapshot can walk them).
func CloseToOthers(t *testing.T, conn *zk.Conn, root string) {
	t.Helper()
	closed := append(zk.DigestACL(zk.PermAll, "other", "pw"), zk.WorldACL(zk.PermRead)...)
	for _, n := range []struct {
		path string
		acl  []zk.ACL
	}{{root + "/locks/closed", closed}, {root + "/queues", zk.WorldACL(zk.PermAll)}, {root + "/queues/closed", closed}} {
		if _, err := conn.Create(n.path, nil, 0, n.acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
}
