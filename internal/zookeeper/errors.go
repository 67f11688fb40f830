package zookeeper

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/go-zookeeper/zk"
)

// Errors of the layer. ZooKeeper's own answers keep their identity (ErrNoNode is
// go-zookeeper's value), so errors.Is works whoever wraps them; every other
// failure of a call is ErrUnavailable or ErrSessionLost. mapError is the one
// place that decides which.
var (
	// ErrUnavailable means the session is not connected now (connecting,
	// suspended, or being replaced after expiry), or a call got no answer in time.
	// The operation may or may not have been applied.
	ErrUnavailable = errors.New("zookeeper unavailable")
	// ErrSessionLost means the session under which a grant was made has expired
	// (ZooKeeper said so) or the Session closed: every ephemeral node of it is gone.
	ErrSessionLost = errors.New("zookeeper session lost")
	// ErrClosed means the Session was closed.
	ErrClosed = errors.New("session closed")

	// ErrNoNode: the node does not exist.
	ErrNoNode = zk.ErrNoNode
	// ErrNodeExists: the node exists already.
	ErrNodeExists = zk.ErrNodeExists
	// ErrBadVersion: the node's version is not the one expected.
	ErrBadVersion = zk.ErrBadVersion
	// ErrNotEmpty: the node has children.
	ErrNotEmpty = zk.ErrNotEmpty
	// ErrNoAuth: the node's ACL refuses this session the operation.
	ErrNoAuth = zk.ErrNoAuth
	// ErrNoChildrenForEphemerals: the parent is an ephemeral node, which
	// cannot have children.
	ErrNoChildrenForEphemerals = zk.ErrNoChildrenForEphemerals
)

// IsAnswer tells whether err is an answer from the server about a node (so the
// session is alive), as opposed to a failure to get one.
func IsAnswer(err error) bool {
	return errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrNodeExists) ||
		errors.Is(err, zk.ErrNotEmpty) || errors.Is(err, zk.ErrBadVersion) ||
		errors.Is(err, zk.ErrNoAuth)
}

// mapError maps what go-zookeeper returned: answers about nodes as they are,
// an expired session to ErrSessionLost, connection trouble to ErrUnavailable.
func mapError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, zk.ErrSessionExpired):
		return fmt.Errorf("%w: %w", ErrSessionLost, err)
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrClosing),
		errors.Is(err, zk.ErrNoServer), errors.Is(err, zk.ErrSessionMoved):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	case isNetError(err):
		// go-zookeeper answers a request whose write failed (the connection
		// broke under it) with the socket's own error.
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// isNetError tells whether err is the connection's failure rather than an
// answer: a socket error, or the stream ending.
func isNetError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed)
}
