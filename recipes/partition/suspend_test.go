package partition

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/prometheus/client_golang/prometheus"
)

// Suspension is not loss: a member's long-poll under way when the session is
// suspended goes on waiting (its nodes stand, it still owns its partitions)
// and at the end of its wait answers the member as it was, instead of telling
// it at once to stop work; once the session could have expired it answers
// ErrUnavailable (a rolling restart of the ensemble would otherwise fail every
// member's long-poll).
func TestAwaitMemberWaitsThroughASuspension(t *testing.T) {
	t.Parallel() // about 20 s of waiting for the doubt
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	// A session timeout far longer than the cut: the session survives it, and
	// is not in doubt before two thirds of it.
	s := zookeepertest.Start(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Root: zktest.Root(t), Timeout: 30 * time.Second})
	reg := prometheus.NewRegistry()
	leases := kit.NewLeases(s, reg)
	t.Cleanup(leases.Close)
	p := New(s, reg)
	ctx := context.Background()

	if _, err := p.SetPartitions(ctx, "g", Set{Count: 4}); err != nil {
		t.Fatal(err)
	}
	lease, err := leases.Grant(time.Minute, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Join(ctx, lease, "g", "a", 1); err != nil {
		t.Fatal(err)
	}
	var me *MemberState
	testutil.Eventually(t, 30*time.Second, "the member owns its four partitions", func() bool {
		me, err = p.Member(ctx, "g", "a")
		return err == nil && len(me.Owned) == 4
	})

	f, err := p.Follow("g")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	proxy.Cut()
	if _, ok := f.Await(ctx, testutil.Patience(20*time.Second), func(st *State) bool { return st.Suspended }); !ok {
		t.Fatal("the group's view never showed the suspension")
	}
	got, err := p.AwaitMember(ctx, "g", "a", me.Version, 300*time.Millisecond)
	switch {
	case err != nil && s.InDoubt():
		// The machine stalled past two thirds of the session timeout: the
		// answer below is then the right one already.
		t.Logf("the session was in doubt before the long-poll answered: %v", err)
	case err != nil:
		t.Fatalf("a member's long-poll while suspended (not in doubt): %v, want the member as it was", err)
	case got.Version != me.Version || len(got.Owned) != 4:
		t.Fatalf("a member's long-poll while suspended: %+v, want %+v", got, me)
	}

	// In doubt (two thirds of the session timeout without an answer: the
	// session could have expired): nothing is owned, and the long-poll says so
	// at once.
	testutil.Eventually(t, time.Minute, "the session in doubt", s.InDoubt)
	if _, err := p.AwaitMember(ctx, "g", "a", me.Version, time.Minute); !errors.Is(err, kit.ErrUnavailable) {
		t.Fatalf("a member's long-poll in doubt: %v, want ErrUnavailable at once", err)
	}
	proxy.Restore()
}
