//go:build linux || darwin || freebsd

package sse

import (
	"errors"
	"net"
	"syscall"
)

// peerClosed peeks at conn (through raw, its socket, when known) without
// blocking and reports whether the peer closed it (end of stream or an error
// other than "nothing to read").
func peerClosed(conn net.Conn, raw syscall.RawConn) bool {
	if raw == nil {
		sc, ok := conn.(syscall.Conn)
		if !ok {
			return false
		}
		var err error
		if raw, err = sc.SyscallConn(); err != nil {
			return true
		}
	}
	closed := false
	var buf [1]byte
	err := raw.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case errors.Is(err, syscall.EAGAIN), errors.Is(err, syscall.EINTR):
		case err != nil:
			closed = true
		case n == 0:
			closed = true
		}
		return true // never wait
	})
	return closed || err != nil
}
