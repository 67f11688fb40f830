package kv

import (
	"errors"
	"fmt"
)

var (
	// ErrKeyNotFound means the key has no value.
	ErrKeyNotFound = errors.New("key not found")
	// ErrHasChildren means a delete without recursion found keys under the key.
	ErrHasChildren = errors.New("keys lie under the key: delete them first, or the whole subtree with recursive=true")
	// ErrLeasedParent means a key would be made under a leased key: a leased
	// key is an ephemeral node, and ZooKeeper gives those no children.
	ErrLeasedParent = errors.New("a key above it is leased (an ephemeral node), which cannot have keys under it")
)

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
