package counter

import (
	"errors"
	"fmt"
)

// ErrCorrupt means the counter's node holds data that is not an 8-byte value.
var ErrCorrupt = errors.New("not a counter")

// ErrNotFound means the counter has no node (a delete of a counter never set).
var ErrNotFound = errors.New("counter not found")

// MismatchError is a compare-and-set refused: the counter's value is not the
// expected one. Value is the current one.
type MismatchError struct {
	Name  string
	Value int64
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("counter %q: value mismatch: the current value is %d", e.Name, e.Value)
}

// OverflowError is an add refused because the sum leaves the int64 range. Value
// is the counter's value it was added to.
type OverflowError struct {
	Name  string
	Value int64
	Add   int64
}

func (e *OverflowError) Error() string {
	return fmt.Sprintf("counter %q: adding %d to %d leaves the signed 64-bit range", e.Name, e.Add, e.Value)
}
