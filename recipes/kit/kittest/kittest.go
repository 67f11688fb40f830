// Package kittest holds what the tests of recipes built on the kit share.
package kittest

import (
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// GrantFor returns a function that grants an explicit lease of a minute from
// leases, failing t when it cannot.
func GrantFor(t testing.TB, leases *kit.Leases) func() *kit.Lease {
	return func() *kit.Lease {
		t.Helper()
		l, err := leases.Grant(time.Minute, false)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
}
