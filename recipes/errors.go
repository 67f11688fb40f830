package recipes

import (
	"errors"
	"fmt"
)

// The sentinel errors of the lock, election and barrier recipes (wrapped with
// %w). The errors every recipe shares (ErrLeaseNotFound, ErrNotHeld,
// ErrUnavailable, ...) are the kit's; api/problem.go maps them all.
var (
	// ErrLocked means the lock was not granted within the wait; see LockedError.
	ErrLocked = errors.New("lock held")
	// ErrCandidateExists means a live candidate already has that id in that election.
	ErrCandidateExists = errors.New("candidate exists")
	// ErrBarrierRaised: the barrier was still raised when the wait ended.
	ErrBarrierRaised = errors.New("barrier raised")
	// ErrBarrierNotReady: fewer than `count` participants had entered when the wait
	// ended; the participant stays enrolled. See BarrierNotReadyError.
	ErrBarrierNotReady = errors.New("double barrier not ready")
	// ErrBarrierNotEmpty: participants were still inside when the wait to leave
	// ended; the own entry is removed already.
	ErrBarrierNotEmpty = errors.New("double barrier not empty")
	// ErrParticipantExists: the participant id is enrolled already, by another
	// lease or another client.
	ErrParticipantExists = errors.New("participant exists")
	// ErrCountMismatch: a participant entered with a count other than the double
	// barrier's; see CountMismatchError.
	ErrCountMismatch = errors.New("count mismatch")
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

// BarrierNotReadyError is returned (it matches ErrBarrierNotReady) when fewer than
// Count participants had entered when the wait ended. The participant stays
// enrolled, held by Lease.
type BarrierNotReadyError struct {
	Name         string
	Count        int
	Participants int
	Lease        string
}

func (e *BarrierNotReadyError) Error() string {
	return fmt.Sprintf("double barrier %q: %d of %d participants have entered", e.Name, e.Participants, e.Count)
}

// Unwrap makes errors.Is(err, ErrBarrierNotReady) hold.
func (e *BarrierNotReadyError) Unwrap() error { return ErrBarrierNotReady }

// CountMismatchError is returned (it matches ErrCountMismatch) when a participant
// enters with a count other than the barrier's: the count of its oldest present
// participant (the first to enter, until the barrier empties). Nothing of the
// attempt is left behind.
type CountMismatchError struct {
	Name  string
	Count int // the barrier's count
}

func (e *CountMismatchError) Error() string {
	return fmt.Sprintf("double barrier %q counts %d participants", e.Name, e.Count)
}

// Unwrap makes errors.Is(err, ErrCountMismatch) hold.
func (e *CountMismatchError) Unwrap() error { return ErrCountMismatch }

// BarrierNotEmptyError is returned (it matches ErrBarrierNotEmpty) when
// participants were still inside when the wait to leave ended.
type BarrierNotEmptyError struct {
	Name      string
	Remaining []string
}

func (e *BarrierNotEmptyError) Error() string {
	return fmt.Sprintf("double barrier %q: %d participants have not left", e.Name, len(e.Remaining))
}

// Unwrap makes errors.Is(err, ErrBarrierNotEmpty) hold.
func (e *BarrierNotEmptyError) Unwrap() error { return ErrBarrierNotEmpty }

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
