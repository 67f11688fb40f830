package barrier

import (
	"errors"
	"fmt"
)

// The sentinel errors of barriers and double barriers (wrapped with %w). They
// also return the kit's (kit.ErrInvalidName, kit.ErrNotHeld, kit.ErrLeaseEnded,
// ...). api/barriers' descriptor maps these to problems, api/problem.go the
// kit's.
var (
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
