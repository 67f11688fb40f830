package recipes

import (
	"errors"
	"fmt"
)

// The sentinel errors of the lock recipe (wrapped with %w). The errors every
// recipe shares (ErrLeaseNotFound, ErrNotHeld, ErrUnavailable, ...) are the
// kit's. The HTTP side's descriptors (api/locks, api/rwlocks, api/semaphores)
// map these to problems, api/problem.go the kit's.
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

// The sentinel errors of semaphores and read/write locks.
var (
	// ErrSemaphoreFull means no permit was granted within the wait; see
	// SemaphoreFullError.
	ErrSemaphoreFull = errors.New("semaphore full")
	// ErrMaxMismatch means an acquire gave a max other than the semaphore's
	// holders'; see MaxMismatchError.
	ErrMaxMismatch = errors.New("max mismatch")
)

// SemaphoreFullError is returned (it matches ErrSemaphoreFull) when no permit
// is granted within the wait. Holders are the holders seen last.
type SemaphoreFullError struct {
	Name    string
	Holders []SemaphoreHolder
}

func (e *SemaphoreFullError) Error() string {
	return fmt.Sprintf("semaphore %q: no permit granted in time (%d held)", e.Name, len(e.Holders))
}

// Unwrap makes errors.Is(err, ErrSemaphoreFull) hold.
func (e *SemaphoreFullError) Unwrap() error { return ErrSemaphoreFull }

// MaxMismatchError is returned (it matches ErrMaxMismatch) when a permit is
// asked for with a max other than the semaphore's: the max recorded by its
// oldest holder that records one. Nothing of the attempt is left behind.
type MaxMismatchError struct {
	Name string
	Max  int // the semaphore's max
}

func (e *MaxMismatchError) Error() string {
	return fmt.Sprintf("semaphore %q has max %d", e.Name, e.Max)
}

// Unwrap makes errors.Is(err, ErrMaxMismatch) hold.
func (e *MaxMismatchError) Unwrap() error { return ErrMaxMismatch }

// RWLockedError is returned (it matches ErrLocked) when a read/write lock is
// not granted within the wait: Writer (nil when none) and Readers are the
// holders seen last.
type RWLockedError struct {
	Name    string
	Mode    string
	Writer  *LockHolder
	Readers []RWReader
}

func (e *RWLockedError) Error() string {
	if e.Writer != nil {
		return fmt.Sprintf("read/write lock %q not granted for %s in time: written by %q", e.Name, e.Mode, e.Writer.Owner)
	}
	return fmt.Sprintf("read/write lock %q not granted for %s in time: %d readers", e.Name, e.Mode, len(e.Readers))
}

// Unwrap makes errors.Is(err, ErrLocked) hold.
func (e *RWLockedError) Unwrap() error { return ErrLocked }
