package election

import "errors"

// The election's own sentinel errors (wrapped with %w). It also returns the
// kit's (kit.ErrInvalidName, kit.ErrNotHeld, kit.ErrLeaseEnded, ...);
// api/elections' descriptor maps these to problems, api/problem.go the kit's.
var (
	// ErrCandidateExists means a live candidate already has that id in that election.
	ErrCandidateExists = errors.New("candidate exists")
)
