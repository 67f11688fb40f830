package partition

import (
	"errors"
	"fmt"
)

// The sentinel errors of the partition groups (wrapped with %w). They also
// return the kit's: kit.ErrInvalidName, kit.ErrInvalidArgument, kit.ErrNotHeld,
// kit.ErrBusy, kit.ErrLeaseEnded, kit.ErrUnavailable, kit.ErrSessionLost.
var (
	// ErrMemberExists means the group has a live member with that id already.
	ErrMemberExists = errors.New("member exists")
	// ErrMemberNotFound means the group has no live member with that id.
	ErrMemberNotFound = errors.New("member not found")
)

// VersionMismatchError is an ack of a version that is not the member's
// current plan: Current is the member's version now.
type VersionMismatchError struct {
	Group, ID string
	Asked     int64
	Current   int64
}

func (e *VersionMismatchError) Error() string {
	return fmt.Sprintf("member %q of %q: version %d is not one of its current plan (now %d)", e.ID, e.Group, e.Asked, e.Current)
}
