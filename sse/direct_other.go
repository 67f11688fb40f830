//go:build !unix

package sse

import (
	"errors"
	"net"
	"syscall"
)

// rawWriter does not exist on this system: streams are written by Serve alone.
type rawWriter struct{}

func newRawWriter(net.Conn) *rawWriter { return nil }

func (*rawWriter) try([]byte) (int, error) {
	return 0, errors.New("sse: direct writes not supported")
}

func (*rawWriter) rawConn() syscall.RawConn { return nil }
