package election

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/kittest"
)

// coord_election_candidates counts the candidacies leases of this sidecar
// hold: up at each enrolment, unchanged by a requeue, and down at every end
// of one, a resignation as much as its lease's revocation or expiry.
func TestCandidatesGaugeFollowsEveryEnd(t *testing.T) {
	zkc := zktest.Shared(t)
	s := zookeepertest.NewSession(t, zkc.Servers(), zktest.Root(t))
	leases := kit.NewLeases(s, nil)
	els := NewElections(s, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	grant := kittest.GrantFor(t, leases)
	gauge := func() float64 { return promtest.ToFloat64(els.metrics.candidates) }

	resigning, revoked := grant(), grant()
	expiring, err := leases.Grant(time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range []*kit.Lease{resigning, revoked, expiring} {
		if _, err := els.Campaign(ctx, l, "e", []string{"a", "b", "c"}[i], "", 0); err != nil {
			t.Fatal(err)
		}
	}
	if g := gauge(); g != 3 {
		t.Fatalf("three candidacies: the gauge is %v", g)
	}
	if _, err := els.Resign(ctx, resigning, "e", "a", true); err != nil {
		t.Fatal(err)
	}
	if g := gauge(); g != 3 {
		t.Fatalf("after a requeue: the gauge is %v, want 3", g)
	}
	if _, err := els.Resign(ctx, resigning, "e", "a", false); err != nil {
		t.Fatal(err)
	}
	if err := leases.Revoke(revoked.ID); err != nil {
		t.Fatal(err)
	}
	if g := gauge(); g != 1 {
		t.Fatalf("after a resignation and a revoked lease: the gauge is %v, want 1", g)
	}
	testutil.Eventually(t, 10*time.Second, "the expired lease's candidacy uncounted", func() bool { return gauge() == 0 })
}
