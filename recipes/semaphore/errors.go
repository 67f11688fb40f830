package semaphore

import (
	"errors"
	"fmt"
)

// The sentinel errors of semaphores (wrapped with %w).
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
