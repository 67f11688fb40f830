package lock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/line"
)

// MaxMultiLock is the most locks one multi-lock takes.
const MaxMultiLock = 32

// AcquireAll takes every lock of names for the lease of src, all or none, as
// Curator's InterProcessMultiLock does over the same paths: each is an
// ordinary lock (its own hold on the lease, adopted after a restart like any
// lock), taken in the order of names, which the caller sorts so that two
// multi-locks never wait for each other in a cycle. wait bounds the whole
// (0: each lock is tried once). Every name is checked before src is asked
// for the lease.
//
// On success the grants come in the order of names. On a failure (a
// LockedError naming the lock in the way, the lease ending, ZooKeeper
// trouble, ctx ending) what this call took is released before it returns,
// and a lock the lease held before the call stays held; an implicit lease
// ends.
func (l *Locks) AcquireAll(ctx context.Context, src kit.LeaseSource, names []string, owner string, wait time.Duration) ([]*LockGrant, error) {
	for _, name := range names {
		if err := kit.CheckName("lock", name); err != nil {
			return nil, err
		}
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	deadline := start.Add(wait)
	grants := make([]*LockGrant, 0, len(names))
	var taken []string // by this call, to let go on a failure
	for _, name := range names {
		_, had := kit.Lookup[*LockGrant](lease, kit.Hold{Kind: lockKind, Name: name})
		g, err := l.Acquire(ctx, lease, name, owner, max(time.Until(deadline), 0))
		if err != nil {
			l.letGo(lease, taken)
			l.multi.WithLabelValues(line.AcquireResult(err, ErrLocked)).Observe(time.Since(start).Seconds())
			return nil, err
		}
		if !had {
			taken = append(taken, name)
		}
		grants = append(grants, g)
	}
	l.multi.WithLabelValues("granted").Observe(time.Since(start).Seconds())
	return grants, nil
}

// letGo releases the locks names that lease took in a multi-lock that
// failed, each within the session's operation timeout (the caller's context
// may be what ended). An implicit lease has ended with the failure already,
// and its holds with it.
func (l *Locks) letGo(lease *kit.Lease, names []string) {
	for _, name := range names {
		ctx, cancel := context.WithTimeout(context.Background(), l.s.OpTimeout())
		_ = kit.Release(ctx, lease, kit.Hold{Kind: lockKind, Name: name})
		cancel()
	}
}

// ReleaseAll releases every lock of names held by the lease of src (asked
// for once the names are checked). When the lease does not hold one of them,
// nothing is released and the error is kit.ErrNotHeld naming it. An implicit
// lease ends with the release.
func (l *Locks) ReleaseAll(ctx context.Context, src kit.LeaseSource, names []string) error {
	for _, name := range names {
		if err := kit.CheckName("lock", name); err != nil {
			return err
		}
	}
	lease, err := src.Lease(ctx)
	if err != nil {
		return err
	}
	for _, name := range names {
		if _, ok := kit.Lookup[*LockGrant](lease, kit.Hold{Kind: lockKind, Name: name}); !ok {
			return fmt.Errorf("lock %q: %w", name, kit.ErrNotHeld)
		}
	}
	// The deletes go out together: ZooKeeper writes them down in one go
	// rather than one after the other.
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		g, err := kit.Take[*LockGrant](lease, kit.Hold{Kind: lockKind, Name: name})
		if err != nil { // released meanwhile by another request: nothing left to do for it
			continue
		}
		wg.Go(func() { errs[i] = g.Release(ctx) })
	}
	wg.Wait()
	lease.Released()
	return errors.Join(errs...)
}
