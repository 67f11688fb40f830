package rwlock

import (
	"fmt"

	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
)

// RWLockedError is returned (it matches lock.ErrLocked) when a read/write lock is
// not granted within the wait: Writer (nil when none) and Readers are the
// holders seen last.
type RWLockedError struct {
	Name    string
	Mode    string
	Writer  *lock.LockHolder
	Readers []RWReader
}

func (e *RWLockedError) Error() string {
	if e.Writer != nil {
		return fmt.Sprintf("read/write lock %q not granted for %s in time: written by %q", e.Name, e.Mode, e.Writer.Owner)
	}
	return fmt.Sprintf("read/write lock %q not granted for %s in time: %d readers", e.Name, e.Mode, len(e.Readers))
}

// Unwrap makes errors.Is(err, lock.ErrLocked) hold.
func (e *RWLockedError) Unwrap() error { return lock.ErrLocked }
