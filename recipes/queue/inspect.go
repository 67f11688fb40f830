package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// MaxListItems bounds Items' limit.
const MaxListItems = 1000

// Inspect counts the queue's waiting, claimed and delayed items, from the Stat
// of each bucket and of delayed/ (no item is listed), in one round trip per
// level.
func (q *Queues) Inspect(ctx context.Context, name string) (*QueueState, error) {
	if err := kit.CheckName("queue", name); err != nil {
		return nil, err
	}
	ep, err := q.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	out := &QueueState{Name: name}
	prios, err := q.listPrios(ctx, ep, name)
	if err != nil {
		return out, err
	}
	perPrio := make([][]int64, len(prios))
	fns := make([]func() error, len(prios))
	for i, p := range prios {
		fns[i] = func() error {
			var err error
			perPrio[i], err = q.buckets(ctx, ep, name, p)
			return err
		}
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return nil, err
	}
	var mu sync.Mutex
	total := 0
	fns = fns[:0]
	fns = append(fns, func() error {
		n, err := q.numChildren(ctx, ep, q.cpath(name))
		mu.Lock()
		out.Claimed = n
		mu.Unlock()
		return err
	}, func() error {
		n, err := q.numChildren(ctx, ep, q.dpath(name))
		mu.Lock()
		out.Delayed = n
		mu.Unlock()
		return err
	})
	for i, p := range prios {
		for _, b := range perPrio[i] {
			fns = append(fns, func() error {
				n, err := q.numChildren(ctx, ep, q.bpath(name, p, b))
				mu.Lock()
				total += n
				mu.Unlock()
				return err
			})
		}
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return nil, err
	}
	out.Length = max(0, total-out.Claimed) + out.Delayed
	return out, nil
}

// numChildren is a node's child count (0 when it does not exist).
func (q *Queues) numChildren(ctx context.Context, ep *zookeeper.Epoch, p string) (int, error) {
	exists, st, err := ep.Exists(ctx, p)
	if err != nil || !exists {
		return 0, err
	}
	return int(st.NumChildren), nil
}

// listPrios lists the queue's priorities, ascending.
func (q *Queues) listPrios(ctx context.Context, ep *zookeeper.Epoch, name string) ([]int, error) {
	children, _, err := ep.Children(ctx, q.qpath(name))
	if errors.Is(err, zookeeper.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("queue %q: %w", name, err)
	}
	var out []int
	for _, ch := range children {
		if p, ok := parsePrio(ch); ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Items lists the first limit (1..MaxListItems) waiting items in take order,
// claimed ones excluded, listing only as many buckets as it needs.
func (q *Queues) Items(ctx context.Context, name string, limit int) ([]QueueItemInfo, error) {
	if err := kit.CheckName("queue", name); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxListItems {
		return nil, fmt.Errorf("limit %d: must be between 1 and %d: %w", limit, MaxListItems, kit.ErrInvalidArgument)
	}
	ep, err := q.s.Await(ctx)
	if err != nil {
		return nil, err
	}
	prios, err := q.listPrios(ctx, ep, name)
	if err != nil {
		return nil, err
	}
	isClaimed, err := q.claimedNow(ctx, ep, name)
	if err != nil {
		return nil, err
	}
	refs, err := q.firstWaiting(ctx, ep, name, prios, isClaimed, limit)
	if err != nil {
		return nil, err
	}
	sizes, err := q.itemSizes(ctx, ep, name, refs)
	if err != nil {
		return nil, err
	}
	out := make([]QueueItemInfo, 0, len(refs))
	for i, r := range refs {
		if sizes[i] >= 0 {
			out = append(out, QueueItemInfo{ID: r.key, Priority: r.prio, Size: sizes[i]})
		}
	}
	return out, nil
}

// claimedNow is the set of the queue's items claimed now, from claims/.
func (q *Queues) claimedNow(ctx context.Context, ep *zookeeper.Epoch, name string) (map[string]bool, error) {
	claimed, _, err := ep.Children(ctx, q.cpath(name))
	if err != nil && !errors.Is(err, zookeeper.ErrNoNode) {
		return nil, err
	}
	isClaimed := make(map[string]bool, len(claimed))
	for _, c := range claimed {
		isClaimed[c] = true
	}
	return isClaimed, nil
}

// firstWaiting lists the first limit items of priorities prios in take order,
// claimed ones excluded, bucket by bucket until it has them.
func (q *Queues) firstWaiting(ctx context.Context, ep *zookeeper.Epoch, name string, prios []int, isClaimed map[string]bool, limit int) ([]itemRef, error) {
	var refs []itemRef
	for _, p := range prios {
		buckets, err := q.buckets(ctx, ep, name, p)
		if err != nil {
			return nil, err
		}
		for _, b := range buckets {
			names, _, err := ep.Children(ctx, q.bpath(name, p, b))
			if errors.Is(err, zookeeper.ErrNoNode) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, r := range bucketRefs(p, b, names) {
				if !isClaimed[r.key] {
					refs = append(refs, r)
				}
			}
			if len(refs) >= limit {
				return refs[:limit], nil
			}
		}
	}
	return refs, nil
}

// itemSizes reads the payload size of each item from its Stat, all at once; -1
// for an item taken meanwhile.
func (q *Queues) itemSizes(ctx context.Context, ep *zookeeper.Epoch, name string, refs []itemRef) ([]int, error) {
	sizes := make([]int, len(refs))
	if len(refs) == 0 {
		return sizes, nil
	}
	fns := make([]func() error, len(refs))
	for i, r := range refs {
		fns[i] = func() error {
			exists, st, err := ep.Exists(ctx, q.ipath(name, r))
			if err == nil && exists {
				_, h, _, _ := parseItemName(r.name)
				sizes[i] = max(0, int(st.DataLength)-h)
			} else {
				sizes[i] = -1 // taken meanwhile
			}
			return err
		}
	}
	if err := zookeeper.Parallel(fns...); err != nil {
		return nil, err
	}
	return sizes, nil
}
