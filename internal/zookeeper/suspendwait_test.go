package zookeeper

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// awaitState waits until s is in state st.
func awaitState(t *testing.T, s *Session, st State) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, "session "+st.String(), func() bool { return s.State() == st })
}

// Under a context of WithSuspendWait, calls made while the session is
// suspended wait for the connection to come back and then go on (a read, a
// create, a multi, Session.Await), each once; without it they fail at once,
// as before.
func TestCallsWaitThroughASuspension(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSessionTimeout(t, []string{proxy.Addr()}, root, 20*time.Second)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	if err := ep.EnsurePersistent(bg, root); err != nil {
		t.Fatal(err)
	}
	proxy.Cut()
	awaitState(t, s, StateSuspended)
	if _, _, err := ep.Get(bg, root); !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost) {
		t.Fatalf("a read without the allowance while suspended: %v, want ErrUnavailable at once", err)
	}

	ctx := WithSuspendWait(bg, time.Minute, time.Time{})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	wg.Add(len(errs))
	go func() { defer wg.Done(); _, _, errs[0] = ep.Get(ctx, root) }()
	go func() { defer wg.Done(); _, errs[1] = ep.Create(ctx, root+"/created", nil, Persistent) }()
	go func() {
		defer wg.Done()
		_, errs[2] = ep.Multi(ctx, CreateOp{Path: root + "/multi", Mode: Persistent})
	}()
	go func() { defer wg.Done(); _, errs[3] = s.Await(ctx) }()
	testutil.Eventually(t, 30*time.Second, "every call waiting", func() bool {
		return promtest.ToFloat64(s.waits.waiting) == float64(len(errs))
	})
	proxy.Restore()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d after the connection came back: %v", i, err)
		}
	}
	if st := s.State(); st != StateConnected || !ep.Connected() {
		t.Fatalf("session %s after the cut, want the same one connected", st)
	}
	children, _, err := ep.Children(bg, root)
	if err != nil || len(children) != 2 {
		t.Fatalf("children %v (%v), want the two nodes made once each", children, err)
	}
}

// A wait that outlasts its allowance ends with ErrUnavailable naming the
// servers, how long it waited and the last connection error.
func TestSuspendWaitEndsWithTheCause(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSessionTimeout(t, []string{proxy.Addr()}, zktest.Root(t), 20*time.Second)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	never := zktest.Root(t)
	proxy.Cut()
	awaitState(t, s, StateSuspended)
	ctx := WithSuspendWait(context.Background(), 300*time.Millisecond, time.Time{})
	for _, call := range []func() error{
		func() error { _, _, err := ep.Get(ctx, "/"); return err },
		func() error { _, err := s.Await(ctx); return err },
		func() error { _, err := ep.Create(ctx, never, nil, Persistent); return err },
	} {
		err := call()
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("%v, want ErrUnavailable", err)
		}
		for _, want := range []string{"did not come back", proxy.Addr(), "suspended since", "last error"} {
			if !strings.Contains(err.Error(), want) {
				t.Fatalf("%q does not say %q", err, want)
			}
		}
	}
	proxy.Restore()
	awaitState(t, s, StateConnected)
	// The create was never sent: nothing was made.
	if ok, _, err := zktest.Connect(t, zkc.Servers(), 10*time.Second).Exists(never); err != nil || ok {
		t.Fatalf("%s exists: %v (%v), want the create never sent", never, ok, err)
	}
}
