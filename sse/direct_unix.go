//go:build unix

package sse

import (
	"net"
	"syscall"
)

// rawConn returns the socket under conn for direct writes, or nil.
func rawConn(conn net.Conn) syscall.RawConn {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return raw
}

// tryWrite writes as much of b to raw as the socket takes without blocking and
// returns how much that was; a full socket buffer is not an error.
func tryWrite(raw syscall.RawConn, b []byte) (int, error) {
	n := 0
	var werr error
	err := raw.Write(func(fd uintptr) bool {
		for n < len(b) {
			m, err := syscall.Write(int(fd), b[n:])
			if m > 0 {
				n += m
			}
			if err == syscall.EINTR || (err == nil && m > 0) {
				continue
			}
			if err != nil && err != syscall.EAGAIN {
				werr = err
			}
			break // the socket is full (or failed)
		}
		return true // never wait for the socket: the caller decides
	})
	if err == nil {
		err = werr
	}
	return n, err
}
