package kv

import (
	"errors"
	"fmt"
)

// ErrKeyNotFound means the key has no value.
var ErrKeyNotFound = errors.New("key not found")

// VersionMismatchError is a compare-and-set refused: the key's version is not
// the one the write or delete named. Version is the current one (-1: absent).
type VersionMismatchError struct {
	Key     string
	Version int32
}

func (e *VersionMismatchError) Error() string {
	if e.Version < 0 {
		return fmt.Sprintf("key %q: version mismatch: the key is absent", e.Key)
	}
	return fmt.Sprintf("key %q: version mismatch: the current version is %d", e.Key, e.Version)
}
