package queue

import "errors"

// The queue's own sentinel errors (wrapped with %w). The queue also returns the
// kit's: kit.ErrInvalidName, kit.ErrInvalidArgument, kit.ErrUnavailable,
// kit.ErrSessionLost, kit.ErrClosed and kit.ErrLeaseEnded.
var (
	// ErrClaimNotFound means no claim with that id is held on this sidecar: it was
	// acked or released, it ended with its lease, or it was never made here.
	ErrClaimNotFound = errors.New("claim not found")
)

// errMovedElsewhere answers the move of a delayed item that another sidecar
// moved first (internal: the item is in its priority either way).
var errMovedElsewhere = errors.New("delayed item moved by another sidecar")
