package service

import "errors"

// The sentinel errors of service discovery (wrapped with %w). The services also
// return the kit's: kit.ErrInvalidName, kit.ErrNotHeld, kit.ErrBusy,
// kit.ErrLeaseEnded, kit.ErrUnavailable, kit.ErrSessionLost. api/services'
// descriptor maps these to problems, api/problem.go the kit's.
var (
	// ErrInstanceExists means the service has a live instance with that id that
	// the lease does not hold: another lease's (of this sidecar or another), or
	// one a Curator ServiceDiscovery registered.
	ErrInstanceExists = errors.New("instance exists")
	// ErrNoInstances means a pick found no enabled instance of the service.
	ErrNoInstances = errors.New("no instances")
	// ErrInvalidInstance means an instance's description is refused (no
	// address, a port out of range, a payload that is not JSON, a uriSpec with
	// unbalanced braces).
	ErrInvalidInstance = errors.New("invalid instance")
)
