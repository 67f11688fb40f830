package election

import "errors"

// The election's own sentinel errors (wrapped with %w). It also returns the
// kit's (kit.ErrInvalidName, kit.ErrNotHeld, kit.ErrLeaseEnded, ...);
// api/problem.go maps them all.
var (
	// ErrCandidateExists means a live candidate already has that id in that election.
	ErrCandidateExists = errors.New("candidate exists")
)
