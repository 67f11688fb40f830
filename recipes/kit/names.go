package kit

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
)

// ValidName reports whether s may be used as a lock, election, queue, group,
// lease or member name: ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$. Such a name is one
// ZooKeeper path segment that is never "." or "..", and never looks like a
// protected-create node (those start with "_").
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 || !alnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }

// CheckName returns an error wrapping ErrInvalidName when s is not ValidName.
func CheckName(kind, s string) error {
	if !ValidName(s) {
		return fmt.Errorf("%s %q: %w", kind, s, ErrInvalidName)
	}
	return nil
}

// idEncoding is base32's standard alphabet in lower case, without padding.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a random id of 20 lower-case base32 characters (96 bits): lease
// ids, claim ids, candidate ids made up for a client.
func NewID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	var out [20]byte
	idEncoding.Encode(out[:], b[:])
	return string(out[:])
}
