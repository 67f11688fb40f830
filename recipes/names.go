package recipes

import (
	"fmt"
	"regexp"
)

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidName reports whether s may be used as a lock, election, queue, group,
// lease or member name: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$. Such a name is one
// ZooKeeper path segment that is never "." or "..", and never looks like a
// protected-create node (those start with "_").
func ValidName(s string) bool { return nameRE.MatchString(s) }

// CheckName returns an error wrapping ErrInvalidName when s is not ValidName.
func CheckName(kind, s string) error {
	if !ValidName(s) {
		return fmt.Errorf("%s %q: %w", kind, s, ErrInvalidName)
	}
	return nil
}
