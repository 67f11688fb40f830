//go:build unix

package statedir

import (
	"os"
	"syscall"
)

// mapShared maps the first size bytes of f, shared with the page cache: a
// store into the mapping is in the file for any process that reads it, this
// one's death notwithstanding.
func mapShared(f *os.File, size int) ([]byte, error) {
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
}

func unmap(m []byte) error { return syscall.Munmap(m) }
