package zookeeper

import (
	"context"
	"errors"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// ZooKeeper opcodes the proxy catches.
const (
	opCreate  = 1
	opDelete  = 2
	opSetData = 5
	opMulti   = 14
)

// A write whose answer is lost with its connection is answered once the
// connection is back with what happened, applied exactly once: adopted when
// the server applied it, sent again when it never got it.
func TestLostAnswerIsChecked(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSessionTimeout(t, []string{proxy.Addr()}, root, 20*time.Second)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithSuspendWait(context.Background(), time.Minute, time.Time{})
	if err := ep.EnsurePersistent(ctx, root); err != nil {
		t.Fatal(err)
	}
	p := root + "/n"
	lost := func(outcome string) float64 { return promtest.ToFloat64(s.waits.lost.WithLabelValues(outcome)) }
	version := func(what string, want int32, data string) {
		t.Helper()
		got, st, err := ep.Get(ctx, p)
		if err != nil || st.Version != want || string(got) != data {
			t.Fatalf("%s: %q at version %v (%v), want %q at %d", what, got, st, err, data, want)
		}
	}

	proxy.LoseAnswer(opCreate)
	if made, err := ep.CreateChecked(ctx, p, []byte("a"), Persistent); err != nil || made != p {
		t.Fatalf("create, answer lost: %q %v", made, err)
	}
	version("create, answer lost", 0, "a")
	proxy.LoseAnswer(opSetData)
	if st, err := ep.SetChecked(ctx, p, []byte("b"), 0); err != nil || st.Version != 1 {
		t.Fatalf("conditional set, answer lost: %v %v, want version 1", st, err)
	}
	proxy.LoseAnswer(opSetData)
	if st, err := ep.SetChecked(ctx, p, []byte("c"), -1); err != nil || st.Version != 2 {
		t.Fatalf("set, answer lost: %v %v, want version 2", st, err)
	}
	version("sets, answer lost", 2, "c")
	proxy.LoseAnswer(opMulti)
	res, err := ep.MultiChecked(ctx, SetOp{Path: p, Data: []byte("d"), Version: 2}, CheckOp{Path: root, Version: 0})
	if err != nil || len(res) != 2 || res[0].Stat == nil || res[0].Stat.Version != 3 {
		t.Fatalf("multi, answer lost: %+v %v, want the set at version 3", res, err)
	}
	if n := lost("applied"); n != 4 {
		t.Fatalf("%v writes adopted, want 4", n)
	}

	proxy.LoseRequest(opSetData)
	if st, err := ep.SetChecked(ctx, p, []byte("e"), 3); err != nil || st.Version != 4 {
		t.Fatalf("conditional set, request lost: %v %v, want version 4", st, err)
	}
	proxy.LoseRequest(opSetData)
	if _, err := ep.SetChecked(ctx, p, []byte("x"), 3); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("stale set, request lost: %v, want ErrBadVersion (sent again, refused)", err)
	}
	version("sets, request lost", 4, "e")
	proxy.LoseRequest(opDelete)
	if err := ep.DeleteChecked(ctx, p, 4); err != nil {
		t.Fatalf("delete, request lost: %v", err)
	}
	if n := lost("resent"); n != 3 {
		t.Fatalf("%v writes sent again, want 3", n)
	}
	if _, err := ep.CreateChecked(ctx, p, nil, Persistent); err != nil {
		t.Fatal(err)
	}
	proxy.LoseAnswer(opDelete)
	if err := ep.DeleteChecked(ctx, p, 0); err != nil {
		t.Fatalf("delete, answer lost: %v", err)
	}
	if ok, _, err := ep.Exists(ctx, p); ok || err != nil {
		t.Fatalf("deleted node: exists %v (%v)", ok, err)
	}
	if n := lost("applied"); n != 5 {
		t.Fatalf("%v writes adopted, want 5", n)
	}
	if n := lost("unknown"); n != 0 {
		t.Fatalf("%v writes of unknown outcome, want 0", n)
	}
	if !ep.Connected() {
		t.Fatal("the session is not the same one connected")
	}
}

// When the node changed again before the connection came back, a lost answer
// cannot be told: ErrUnavailable saying the outcome is unknown, nothing sent
// twice. Without the allowance to wait, the lost answer is ErrUnavailable at
// once, as from Set.
func TestLostAnswerThatCannotBeToldIsUnavailable(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSessionTimeout(t, []string{proxy.Addr()}, root, 20*time.Second)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithSuspendWait(context.Background(), time.Minute, time.Time{})
	p := root + "/n"
	if err := ep.EnsurePersistent(ctx, p); err != nil {
		t.Fatal(err)
	}
	other := zktest.Connect(t, zkc.Servers(), 10*time.Second)

	proxy.LoseAnswerThenCut(opSetData)
	done := make(chan error, 1)
	go func() { _, err := ep.SetChecked(ctx, p, []byte("mine"), 0); done <- err }()
	awaitState(t, s, StateSuspended)
	if _, err := other.Set(p, []byte("theirs"), 1); err != nil { // after the lost set, at version 1
		t.Fatal(err)
	}
	proxy.Restore()
	err = <-done
	if !errors.Is(err, ErrUnavailable) || !IsOutcomeUnknown(err) {
		t.Fatalf("set whose node changed again: %v, want ErrUnavailable, outcome unknown", err)
	}
	data, st, err := ep.Get(ctx, p)
	if err != nil || st.Version != 2 || string(data) != "theirs" {
		t.Fatalf("node %q at %v (%v), want theirs at version 2: nothing sent twice", data, st, err)
	}
	if n := promtest.ToFloat64(s.waits.lost.WithLabelValues("unknown")); n != 1 {
		t.Fatalf("%v writes of unknown outcome, want 1", n)
	}

	proxy.LoseAnswer(opSetData)
	if _, err := ep.SetChecked(context.Background(), p, []byte("x"), 2); !errors.Is(err, ErrUnavailable) || IsOutcomeUnknown(err) {
		t.Fatalf("set without the allowance, answer lost: %v, want ErrUnavailable at once", err)
	}
}
