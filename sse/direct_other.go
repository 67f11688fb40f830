//go:build !unix

package sse

import (
	"errors"
	"net"
	"syscall"
)

// rawConn returns nil: streams are written by Serve alone on this system.
func rawConn(net.Conn) syscall.RawConn { return nil }

func tryWrite(syscall.RawConn, []byte) (int, error) {
	return 0, errors.New("sse: direct writes not supported")
}
