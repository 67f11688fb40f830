//go:build !(linux || darwin || freebsd)

package sse

import "net"

// peerClosed cannot peek on this system: a gone client is noticed when a write
// fails (at the latest at the next heartbeat).
func peerClosed(net.Conn) bool { return false }
