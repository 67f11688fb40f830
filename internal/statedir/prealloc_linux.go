//go:build linux

package statedir

import (
	"os"
	"syscall"
)

// preallocate gives f size bytes of disk now (fallocate), so that a store
// into its mapping never needs a block the disk does not have (a full disk
// fails here, not with a SIGBUS later).
func preallocate(f *os.File, size int64) error {
	for {
		err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
		if err != syscall.EINTR {
			return err
		}
	}
}
