//go:build unix

package sse

import (
	"net"
	"syscall"
)

// rawWriter writes to a socket without blocking, through its syscall.RawConn;
// it is reused for every write of its Writer, so that a write allocates nothing.
type rawWriter struct {
	conn syscall.RawConn
	fn   func(fd uintptr) bool // write, bound once
	b    []byte
	n    int
	err  error
}

// newRawWriter returns a rawWriter for conn's socket, or nil.
func newRawWriter(conn net.Conn) *rawWriter {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	rw := &rawWriter{conn: raw}
	rw.fn = rw.write
	return rw
}

// try writes as much of b as the socket takes without blocking and returns
// how much that was; a full socket buffer is not an error.
func (rw *rawWriter) try(b []byte) (int, error) {
	rw.b, rw.n, rw.err = b, 0, nil
	err := rw.conn.Write(rw.fn)
	n, werr := rw.n, rw.err
	rw.b, rw.err = nil, nil
	if err == nil {
		err = werr
	}
	return n, err
}

func (rw *rawWriter) write(fd uintptr) bool {
	for rw.n < len(rw.b) {
		m, err := syscall.Write(int(fd), rw.b[rw.n:])
		if m > 0 {
			rw.n += m
		}
		if err == syscall.EINTR || (err == nil && m > 0) {
			continue
		}
		if err != nil && err != syscall.EAGAIN {
			rw.err = err
		}
		break // the socket is full (or failed)
	}
	return true // never wait for the socket: the caller decides
}

// rawConn is the socket, for the Reaper's peek (nil without a rawWriter).
func (rw *rawWriter) rawConn() syscall.RawConn {
	if rw == nil {
		return nil
	}
	return rw.conn
}
