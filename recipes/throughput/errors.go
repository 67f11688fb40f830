package throughput

import (
	"errors"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// The sentinel errors of the throughput groups (wrapped with %w; callers test
// them with errors.Is). The groups also return the kit's: kit.ErrInvalidName,
// kit.ErrInvalidArgument, kit.ErrNotHeld, kit.ErrBusy, kit.ErrLeaseEnded,
// kit.ErrUnavailable, kit.ErrSessionLost.
var (
	// ErrMemberExists means the group has a live member with that id already:
	// kit.ErrMemberExists, which every group recipe shares (errors.Is matches
	// either name).
	ErrMemberExists = kit.ErrMemberExists
	// ErrMemberNotFound means the group has no live member with that id:
	// kit.ErrMemberNotFound.
	ErrMemberNotFound = kit.ErrMemberNotFound
)

// errStaleTerm means a writer's term is below the one of the allocation there.
var errStaleTerm = errors.New("allocation written under a higher term")
