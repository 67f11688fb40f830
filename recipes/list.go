package recipes

import (
	"context"
	"errors"
	"sort"

	"github.com/go-zookeeper/zk"
)

// listNames lists the valid names under one recipe's directory, sorted. A
// missing directory is an empty list. It reads one directory: use it for listings
// and status pages, not on a hot path.
func listNames(ctx context.Context, s *Session, dir string) ([]string, error) {
	ep, err := s.current()
	if err != nil {
		return nil, err
	}
	var children []string
	err = ep.call(ctx, func(c *zk.Conn) error {
		var err error
		children, _, err = c.Children(dir)
		return err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	names := children[:0]
	for _, c := range children {
		if ValidName(c) {
			names = append(names, c)
		}
	}
	sort.Strings(names)
	return names, nil
}

// List returns the names of the locks that have a node (held, waited for, or an
// empty container not yet reclaimed by ZooKeeper).
func (l *Locks) List(ctx context.Context) ([]string, error) { return listNames(ctx, l.s, l.dir) }

// List returns the names of the elections that have a node.
func (e *Elections) List(ctx context.Context) ([]string, error) { return listNames(ctx, e.s, e.dir) }

// List returns the names of the barriers that are raised.
func (b *Barriers) List(ctx context.Context) ([]string, error) { return listNames(ctx, b.s, b.dir) }

// ListDouble returns the names of the double barriers that have a node.
func (b *Barriers) ListDouble(ctx context.Context) ([]string, error) {
	return listNames(ctx, b.s, b.dblDir)
}

// List returns the names of the queues that have a node.
func (q *Queues) List(ctx context.Context) ([]string, error) { return listNames(ctx, q.s, q.dir) }

// List returns the names of the throughput groups that have a node.
func (t *Throughputs) List(ctx context.Context) ([]string, error) { return listNames(ctx, t.s, t.dir) }
