//go:build !(linux || darwin || freebsd)

package sse

import (
	"net"
	"syscall"
)

// peerClosed cannot peek on this system: a gone client is noticed when a write
// fails (at the latest at the next heartbeat).
func peerClosed(net.Conn, syscall.RawConn) bool { return false }
