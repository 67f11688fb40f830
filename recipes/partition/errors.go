package partition

import (
	"fmt"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// The sentinel errors of the partition groups (wrapped with %w). They also
// return the kit's: kit.ErrInvalidName, kit.ErrInvalidArgument, kit.ErrNotHeld,
// kit.ErrBusy, kit.ErrLeaseEnded, kit.ErrUnavailable, kit.ErrSessionLost.
var (
	// ErrMemberExists means the group has a live member with that id already:
	// kit.ErrMemberExists, which every group recipe shares (errors.Is matches
	// either name).
	ErrMemberExists = kit.ErrMemberExists
	// ErrMemberNotFound means the group has no live member with that id:
	// kit.ErrMemberNotFound.
	ErrMemberNotFound = kit.ErrMemberNotFound
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
