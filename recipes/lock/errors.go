package lock

import (
	"errors"
	"fmt"
)

// The sentinel errors of the lock recipe (wrapped with %w); read/write locks
// answer ErrLocked too. The errors every recipe shares (ErrLeaseNotFound,
// ErrNotHeld, ErrUnavailable, ...) are the kit's; api/problem.go maps them all.
var (
	// ErrLocked means the lock was not granted within the wait; see LockedError.
	ErrLocked = errors.New("lock held")
)

// LockedError is returned (it matches ErrLocked) when a lock is not granted within
// the wait. Holder is the holder seen last, nil when the lock was free at that
// moment (the waiter gave up just as it was released).
type LockedError struct {
	Name   string
	Holder *LockHolder
}

func (e *LockedError) Error() string {
	if e.Holder == nil {
		return fmt.Sprintf("lock %q not granted in time", e.Name)
	}
	return fmt.Sprintf("lock %q held by %q (fencing token %d)", e.Name, e.Holder.Owner, e.Holder.FencingToken)
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *LockedError) Unwrap() error { return ErrLocked }
