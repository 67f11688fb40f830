package election

import (
	"context"
	"fmt"
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
	els := New(s, prometheus.NewRegistry())
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

// A follower keeps the line cached: after a change of leader it reads the list
// and the one new node, not every candidate again (counted by the server, on
// the follower's own connection: `cons`); a value proclaimed by a candidate
// that is not new still reaches it, through that candidate's data watch.
func TestFollowerReadsOnlyWhatChanged(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	server := zkc.Server(0)
	campaigning := zookeepertest.NewSession(t, []string{server}, root)
	following := zookeepertest.NewSession(t, []string{server}, root)
	leases := kit.NewLeases(campaigning, nil)
	els := New(campaigning, prometheus.NewRegistry())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lease := kittest.GrantFor(t, leases)()

	const candidates = 40
	for i := range candidates {
		if _, err := els.Campaign(ctx, lease, "e", fmt.Sprintf("c%d", i), "", 0); err != nil {
			t.Fatal(err)
		}
	}
	f, err := New(following, prometheus.NewRegistry()).Follow("e")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	led := func(leader string) func(*ElectionState) bool {
		return func(st *ElectionState) bool {
			return st.Leader != nil && st.Leader.Candidate == leader && len(st.Candidates) == candidates
		}
	}
	if st, ok := f.Await(ctx, 30*time.Second, led("c0")); !ok {
		t.Fatalf("the follower's first state: %+v", st)
	}

	sid := fmt.Sprintf("0x%x", following.Info().SessionID)
	before := zktest.Received(t, server, sid)
	if _, err := els.Resign(ctx, lease, "e", "c0", true); err != nil {
		t.Fatal(err)
	}
	st, ok := f.Await(ctx, 30*time.Second, led("c1"))
	if !ok || st.Candidates[candidates-1].Candidate != "c0" {
		t.Fatalf("after c0 requeued: %+v", st)
	}
	// The list and c0's new node, and the session's pings meanwhile; reading
	// every candidate again would be over 40.
	got := zktest.Received(t, server, sid) - before
	t.Logf("%d requests for one change of leader among %d candidates", got, candidates)
	if got >= candidates/2 {
		t.Fatalf("the follower sent %d requests for one change of leader among %d candidates", got, candidates)
	}

	if _, err := els.Proclaim(ctx, lease, "e", "c7", "proclaimed"); err != nil {
		t.Fatal(err)
	}
	if st, ok := f.Await(ctx, 30*time.Second, func(st *ElectionState) bool {
		return len(st.Candidates) == candidates && st.Candidates[6].Value == "proclaimed"
	}); !ok {
		t.Fatalf("c7's proclaimed value never reached the follower: %+v", st)
	}
}
