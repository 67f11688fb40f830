package kit

import (
	"errors"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// The sentinel errors every recipe may return (wrapped with %w); api/problem.go
// maps them to their problems. Each recipe package declares its own next to
// its code, and its HTTP side's descriptor (api.Descriptor) maps those.
var (
	// ErrUnavailable means the ZooKeeper session is not connected now, or a call
	// got no answer in time. The operation may or may not have been applied.
	ErrUnavailable = zookeeper.ErrUnavailable
	// ErrSessionLost means the ZooKeeper session under which a grant was made is
	// gone: every grant made under it is gone.
	ErrSessionLost = zookeeper.ErrSessionLost
	// ErrClosed means the Session was closed.
	ErrClosed = zookeeper.ErrClosed
	// ErrForbiddenByACL means a ZooKeeper node's ACL refuses the sidecar the
	// operation.
	ErrForbiddenByACL = zookeeper.ErrNoAuth
	// ErrInvalidName means a name does not match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$.
	ErrInvalidName = errors.New("invalid name")
	// ErrInvalidArgument means a parameter is out of its range.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrLeaseNotFound means no live lease has that id.
	ErrLeaseNotFound = errors.New("lease not found")
	// ErrLeaseEnded means the lease ended (revoked, expired or lost) while an
	// operation on its behalf was under way.
	ErrLeaseEnded = errors.New("lease ended")
	// ErrLeaseExpired is the end reason of a lease that was not kept alive in time.
	ErrLeaseExpired = errors.New("lease expired")
	// ErrLeaseRevoked is the end reason of a revoked lease.
	ErrLeaseRevoked = errors.New("lease revoked")
	// ErrNotHeld means the lease does not hold the named thing.
	ErrNotHeld = errors.New("not held")
	// ErrBusy means the same lease is already acquiring the same thing.
	ErrBusy = errors.New("acquisition already under way")
	// ErrMemberExists means a group (a membership, partition or throughput
	// group) has a live member with that id already. Each such recipe names it
	// as its own ErrMemberExists, the same value.
	ErrMemberExists = errors.New("member exists")
	// ErrMemberNotFound means a group has no live member with that id; each
	// such recipe names it as its own ErrMemberNotFound.
	ErrMemberNotFound = errors.New("member not found")
)
