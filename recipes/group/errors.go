package group

import "errors"

// The sentinel errors of the membership groups (wrapped with %w). The groups
// also return the kit's: kit.ErrInvalidName, kit.ErrNotHeld, kit.ErrBusy,
// kit.ErrLeaseEnded, kit.ErrUnavailable, kit.ErrSessionLost.
var (
	// ErrMemberExists means the group has a live member with that id already
	// (of this sidecar, of another, or a Curator GroupMember).
	ErrMemberExists = errors.New("member exists")
	// ErrMemberNotFound means the group has no live member with that id.
	ErrMemberNotFound = errors.New("member not found")
)
