//go:build !linux

package statedir

import "os"

// preallocate sizes f; without fallocate the blocks are not reserved.
func preallocate(f *os.File, size int64) error { return f.Truncate(size) }
