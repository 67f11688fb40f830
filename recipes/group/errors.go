package group

import "github.com/coord-sidecar/coord-sidecar/recipes/kit"

// The sentinel errors of the membership groups (wrapped with %w). The groups
// also return the kit's: kit.ErrInvalidName, kit.ErrNotHeld, kit.ErrBusy,
// kit.ErrLeaseEnded, kit.ErrUnavailable, kit.ErrSessionLost.
var (
	// ErrMemberExists means the group has a live member with that id already (of this sidecar, of another, or a Curator GroupMember):
	// kit.ErrMemberExists, which every group recipe shares (errors.Is matches
	// either name).
	ErrMemberExists = kit.ErrMemberExists
	// ErrMemberNotFound means the group has no live member with that id:
	// kit.ErrMemberNotFound.
	ErrMemberNotFound = kit.ErrMemberNotFound
)
