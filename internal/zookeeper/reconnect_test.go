package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A session that reconnects again and again while it has many watches armed
// and calls under way. go-zookeeper's own bookkeeping of the last zxid races
// here (go-zookeeper/zk#35: its receive loop writes the field while the
// reconnect reads it to re-set the watches), which `-race` reports; with the
// wire keeping it (internal/zkwire) there is nothing to report, a node changed
// while the session was away fires its watch once it is back, and the watches
// of the nodes left alone stay quiet (the watches are re-set relative to the
// zxid seen before the reconnect, not to 0 and not to a newer one).
func TestReconnectsUnderWatchesAndCalls(t *testing.T) {
	const quiet, rounds, callers = 1000, 8, 4
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSessionTimeout(t, []string{proxy.Addr()}, root, 20*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(2*time.Minute))
	defer cancel()
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	other := zktest.Connect(t, zkc.Servers(), 10*time.Second)
	dir := root + "/watched"
	for _, p := range []string{root, dir} {
		if _, err := other.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	changed := dir + "/changed"
	quietWatches := make([]<-chan Event, quiet)
	if _, err := other.Create(changed, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for i := range quiet {
		p := fmt.Sprintf("%s/quiet-%04d", dir, i)
		if _, err := other.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
		if _, _, quietWatches[i], err = ep.GetW(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	// Calls under way all along: each is answered or refused as unavailable
	// while the session is away; never anything else.
	callErrs, stopCalls := callAllAlong(ctx, ep, dir, callers)
	defer stopCalls()

	for round := range rounds {
		var watch <-chan Event
		untilAvailable(t, ctx, func() (err error) { _, _, watch, err = ep.GetW(ctx, changed); return err })
		connects := ep.Connects()
		proxy.Cut()
		if _, err := other.Set(changed, fmt.Appendf(nil, "round %d", round), -1); err != nil {
			t.Fatal(err)
		}
		proxy.Restore()
		select {
		case ev := <-watch:
			if ev.Type != zk.EventNodeDataChanged {
				t.Fatalf("round %d: the changed node's watch gave %v, want a data change", round, ev.Type)
			}
		case err := <-callErrs:
			t.Fatalf("round %d: a call failed: %v", round, err)
		case <-ctx.Done():
			t.Fatalf("round %d: the change made while away never fired its watch", round)
		}
		for ep.Connects() == connects && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		// The watch fired from the server's re-set of the watches, so every
		// event that re-set made came before the answer to a call sent now.
		untilAvailable(t, ctx, func() error { _, _, err := ep.Exists(ctx, dir); return err })
		for i, w := range quietWatches {
			select {
			case ev := <-w:
				t.Fatalf("round %d: quiet node %d's watch fired (%v): the watches were re-set relative to the wrong zxid", round, i, ev.Type)
			default:
			}
		}
	}
	if ep.IsLost() {
		t.Fatal("the session was lost: each reconnect should have kept it")
	}
}

// callAllAlong keeps n callers reading p until stop; a failure other than
// ErrUnavailable is sent on errs and ends its caller.
func callAllAlong(ctx context.Context, ep *Epoch, p string, n int) (errs <-chan error, stop func()) {
	done := make(chan struct{})
	failed := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, _, err := ep.Exists(ctx, p); err != nil && !errors.Is(err, ErrUnavailable) {
					failed <- err
					return
				}
			}
		}()
	}
	return failed, func() { close(done); wg.Wait() }
}

// untilAvailable calls f until it answers other than ErrUnavailable (the
// session is back), failing t on any other error.
func untilAvailable(t *testing.T, ctx context.Context, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		if !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Retry waits out a connection that drops: the step refused as unavailable
// runs again once the same session is back, and its answer is Retry's. While
// the session stays away, Retry ends with ctx, still unavailable, not lost.
func TestRetryWaitsOutADroppedConnection(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSessionTimeout(t, []string{proxy.Addr()}, zktest.Root(t), 20*time.Second)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	away := func() {
		t.Helper()
		proxy.Cut()
		testutil.Eventually(t, 10*time.Second, "the session suspended", func() bool { return s.State() == StateSuspended })
	}

	away()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(time.Minute))
	defer cancel()
	var tries []error
	err = ep.Retry(ctx, func() error {
		_, _, err := ep.Exists(ctx, "/")
		if tries = append(tries, err); len(tries) == 1 {
			proxy.Restore()
		}
		return err
	})
	if err != nil || len(tries) != 2 || !errors.Is(tries[0], ErrUnavailable) {
		t.Fatalf("Retry = %v after tries %v; want nil after one refusal as unavailable", err, tries)
	}

	away()
	short, cancelShort := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancelShort()
	err = ep.Retry(short, func() error { _, _, err := ep.Exists(short, "/"); return err })
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost) {
		t.Fatalf("Retry while the session is away = %v; want unavailable once ctx ends", err)
	}
	proxy.Restore()
}
