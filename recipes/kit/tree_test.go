package kit_test

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// A TreeSource's subscriber sees the subtree as it is first, then every change
// a watch of it covers: a node created below a node Deeper accepts, a node
// created under the name, the name's node deleted, created again, and a node
// below an accepted node of the new tree (its watches armed again).
func TestTreeSourceFollowsTheSubtree(t *testing.T) {
	s, ep := rootedSession(t)
	ctx := context.Background()
	job := s.Root() + "/queues/job"
	create(t, ep, s.Root()+"/queues", job, job+"/a", job+"/z")

	reg := kit.NewFollowers(s, nil, func(name string) kit.Source[string] {
		return kit.NewTreeSource(job, func(rel string) bool { return rel == "a" }, subtree(s, job),
			func(a, b string) bool { return a == b })
	})
	f := reg.Follow("job")
	defer f.Close()
	seen := &states[string]{}
	defer f.Subscribe(seen.add)()

	seen.await(t, "a z", "the subtree as it is")
	if first := seen.all()[0]; first != "a z" {
		t.Fatalf("first state %q, want the subtree as it is, %q", first, "a z")
	}
	create(t, ep, job+"/a/x")
	seen.await(t, "a a/x z", "a node created below the accepted node a (its children watch)")
	create(t, ep, job+"/b")
	seen.await(t, "a a/x b z", "a node created under the name (the name's children watch)")
	if _, err := ep.Multi(ctx, del(job+"/a/x", job+"/a", job+"/b", job+"/z", job)...); err != nil {
		t.Fatal(err)
	}
	seen.await(t, "absent", "the name's node deleted")
	create(t, ep, job)
	seen.await(t, "", "the name's node created again (its existence watch)")
	create(t, ep, job+"/a", job+"/a/y")
	seen.await(t, "a a/y", "a node below the new accepted node a")
}

// rootedSession is a session on the shared ZooKeeper under a root of the test's
// own, which exists, and its epoch.
func rootedSession(t *testing.T) (*zookeeper.Session, *zookeeper.Epoch) {
	t.Helper()
	s := zookeepertest.NewSession(t, zktest.Shared(t).Servers(), zktest.Root(t))
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.EnsurePersistent(context.Background(), s.Root()); err != nil {
		t.Fatal(err)
	}
	return s, ep
}

// create makes each node of paths, in order.
func create(t *testing.T, ep *zookeeper.Epoch, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := ep.Create(context.Background(), p, nil, zookeeper.Persistent); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

// creates is the transaction that makes each node of paths, in order.
func creates(paths ...string) []zookeeper.Op {
	ops := make([]zookeeper.Op, 0, len(paths))
	for _, p := range paths {
		ops = append(ops, zookeeper.CreateOp{Path: p, Mode: zookeeper.Persistent})
	}
	return ops
}

// del is the transaction that deletes each node of paths, in order.
func del(paths ...string) []zookeeper.Op {
	ops := make([]zookeeper.Op, 0, len(paths))
	for _, p := range paths {
		ops = append(ops, zookeeper.DeleteOp{Path: p, Version: -1})
	}
	return ops
}

// subtree reads the nodes below p with plain reads (no watch), as their paths
// relative to p, sorted and joined by spaces; "absent" when p does not exist.
func subtree(s *zookeeper.Session, p string) func(context.Context) (string, error) {
	return func(ctx context.Context) (string, error) {
		ep, err := s.Current()
		if err != nil {
			return "", err
		}
		var paths []string
		var walk func(p, rel string) error
		walk = func(p, rel string) error {
			kids, _, err := ep.Children(ctx, p)
			if errors.Is(err, zookeeper.ErrNoNode) && rel != "" {
				return nil // deleted since its parent was listed
			}
			if err != nil {
				return err
			}
			slices.Sort(kids)
			for _, k := range kids {
				r := strings.TrimPrefix(rel+"/"+k, "/")
				paths = append(paths, r)
				if err := walk(p+"/"+k, r); err != nil {
					return err
				}
			}
			return nil
		}
		err = walk(p, "")
		if errors.Is(err, zookeeper.ErrNoNode) {
			return "absent", nil
		}
		return strings.Join(paths, " "), err
	}
}

// states records what a subscriber was given, in order.
type states[S any] struct {
	mu   sync.Mutex
	seen []S
}

func (r *states[S]) add(st S) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, st)
}

func (r *states[S]) all() []S {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

// await waits until the last state given is want (deeply equal: an empty list
// is not nil).
func (r *states[S]) await(t *testing.T, want S, what string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, what, func() bool {
		all := r.all()
		return len(all) > 0 && reflect.DeepEqual(all[len(all)-1], want)
	})
}
