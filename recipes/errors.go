package recipes

import (
	"errors"
	"fmt"
)

// Sentinel errors returned (wrapped with %w) by every recipe. Callers test them
// with errors.Is; the HTTP layer maps each to one problem type.
var (
	// ErrUnavailable means the ZooKeeper session is not connected now (connecting,
	// suspended, or being replaced after expiry), or a call did not get an answer in
	// time. The operation may or may not have been applied; retry later.
	ErrUnavailable = errors.New("zookeeper unavailable")
	// ErrSessionLost means the ZooKeeper session under which a grant was made has
	// expired (or was abandoned as expired): every grant made under it is gone.
	ErrSessionLost = errors.New("zookeeper session lost")
	// ErrClosed means the Session was closed.
	ErrClosed = errors.New("session closed")
	// ErrInvalidName means a name does not match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidArgument means a parameter is out of its range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrLeaseNotFound means no live lease has that id.
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrLeaseEnded means the lease ended (revoked, expired or lost) while an
	// operation on its behalf was under way.
	ErrLeaseEnded = errors.New("lease ended")
	// ErrLeaseExpired is the end reason of a lease that was not kept alive in time.
	ErrLeaseExpired = errors.New("lease expired")
	// ErrLeaseRevoked is the end reason of a revoked lease.
	ErrLeaseRevoked = errors.New("lease revoked")
	// ErrNotHeld means the lease does not hold the named thing.
	ErrNotHeld = errors.New("not held")
	// ErrLocked means the lock was not granted within the wait; see LockedError.
	ErrLocked = errors.New("lock held")
	// ErrBusy means the same lease is already acquiring the same lock.
	ErrBusy = errors.New("acquisition already under way")
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
