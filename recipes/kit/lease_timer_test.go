package kit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// An implicit lease gets no timer of its own at its grant, only at the shared
// sweep after it (issue 41): one that is never released still expires, not
// before its TTL, while the implicit leases revoked around it (some before the
// sweep, some after) simply end; an explicit lease beside them lives on.
func TestImplicitLeaseExpiresWithoutATimerAtItsGrant(t *testing.T) {
	s := zookeepertest.NewSession(t, zktest.Shared(t).Servers(), zktest.Root(t))
	leases := kit.NewLeases(s, nil)
	t.Cleanup(func() { leases.Close() })

	granted := time.Now()
	kept, err := leases.Grant(time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	explicit, err := leases.Grant(time.Hour, false)
	if err != nil {
		t.Fatal(err)
	}
	var revoked []*kit.Lease
	for i := range 200 {
		l, err := leases.Grant(time.Minute, true)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // half at once, half after a sweep has given them their timers
			if err := leases.Revoke(l.ID); err != nil {
				t.Fatal(err)
			}
		}
		revoked = append(revoked, l)
	}
	time.Sleep(600 * time.Millisecond) // past two sweeps (250ms each) on an idle machine; a busy one only sweeps later
	for _, l := range revoked {
		if err := leases.Revoke(l.ID); err != nil && !errors.Is(err, kit.ErrLeaseNotFound) {
			t.Fatal(err)
		}
		if !errors.Is(l.Err(), kit.ErrLeaseRevoked) {
			t.Fatalf("a revoked implicit lease ended with %v", l.Err())
		}
	}

	select {
	case <-kept.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("an implicit lease not kept alive did not expire within 30s of its 1s TTL")
	}
	if !errors.Is(kept.Err(), kit.ErrLeaseExpired) {
		t.Fatalf("the implicit lease ended with %v, want expired", kept.Err())
	}
	if lived := time.Since(granted); lived < time.Second {
		t.Fatalf("the implicit lease expired %s after its grant, before its 1s TTL", lived)
	}
	if explicit.Err() != nil {
		t.Fatalf("the explicit lease ended: %v", explicit.Err())
	}
	if n := leases.Len(); n != 1 {
		t.Fatalf("%d live leases, want the explicit one alone", n)
	}
}
