package zookeeper

import (
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A suspension that lasts until the session could have expired puts its epoch
// in doubt, no sooner than CouldHaveExpiredAt: Doubted and Changed close,
// InDoubt turns true, but the epoch is not lost and the session stays
// suspended (no state change, no session event): the Session never abandons a
// session the ensemble may still hold. Once the connection is back the session
// is connected again (the same epoch, or a new one if ZooKeeper expired it
// meanwhile) and no longer in doubt.
func TestDoubtIsNotLoss(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSessionTimeout(t, []string{proxy.Addr()}, zktest.Root(t), 3*time.Second)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	doubted := ep.Doubted()
	var events []StateChange
	cancel := s.Subscribe(func(ch StateChange) { events = append(events, ch) }) // under the Session's lock
	defer cancel()

	proxy.Cut()
	defer proxy.Restore()
	testutil.Eventually(t, 10*time.Second, "suspended", func() bool { return s.State() == StateSuspended })
	changed := s.Changed()
	select {
	case <-doubted:
	case <-time.After(testutil.Patience(30 * time.Second)):
		t.Fatal("never in doubt")
	}
	at := time.Now()
	if at.Before(ep.CouldHaveExpiredAt()) {
		t.Fatalf("in doubt at %s, before the session could have expired (%s)", at.Format(time.StampMilli), ep.CouldHaveExpiredAt().Format(time.StampMilli))
	}
	// Doubted closes first, then Changed, each under its own step: wait for
	// the second rather than look at the instant the first closed.
	select {
	case <-changed:
	case <-time.After(testutil.Patience(10 * time.Second)):
		t.Fatal("Changed did not close at the doubt")
	}
	if !s.InDoubt() || ep.IsLost() || s.State() != StateSuspended || ep.Doubts() != 1 {
		t.Fatalf("in doubt %v, lost %v, state %v, doubts %d: want in doubt, not lost, still suspended, once",
			s.InDoubt(), ep.IsLost(), s.State(), ep.Doubts())
	}
	if since, ok := s.Suspension(); !ok || since.After(at) {
		t.Fatalf("Suspension() = %s, %v while suspended", since, ok)
	}
	s.mu.Lock()
	names := make([]string, 0, len(events))
	for _, ch := range events {
		names = append(names, ch.Event)
	}
	s.mu.Unlock()
	if len(names) != 1 || names[0] != "suspended" {
		t.Fatalf("session events %v, want only suspended", names)
	}
	select {
	case <-ep.Doubted():
		t.Fatal("the next doubt's channel is closed already")
	default:
	}

	proxy.Restore()
	testutil.Eventually(t, 30*time.Second, "connected again", func() bool { return s.State() == StateConnected })
	if s.InDoubt() {
		t.Fatal("still in doubt once connected")
	}
	if cur, _ := s.Current(); cur == ep {
		t.Logf("the same session came back (doubts %d)", ep.Doubts())
	} else {
		t.Logf("ZooKeeper expired the session meanwhile: a new one (lost %v)", ep.IsLost())
	}
}
