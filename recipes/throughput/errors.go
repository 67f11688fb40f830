package throughput

import "errors"

// The sentinel errors of the throughput groups (wrapped with %w; callers test
// them with errors.Is). The groups also return the kit's: kit.ErrInvalidName,
// kit.ErrInvalidArgument, kit.ErrNotHeld, kit.ErrBusy, kit.ErrLeaseEnded,
// kit.ErrUnavailable, kit.ErrSessionLost.
var (
	// ErrMemberExists means a live member already has that id in that group.
	ErrMemberExists = errors.New("member exists")
	// ErrMemberNotFound means no live member has that id in that group.
	ErrMemberNotFound = errors.New("member not found")
)

// errStaleTerm means a writer's term is below the one of the allocation there.
var errStaleTerm = errors.New("allocation written under a higher term")
