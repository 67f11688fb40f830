package zookeeper

import (
	"context"
	"errors"
	"path"
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

// lostRig is a session through a fault proxy, with the allowance to wait.
type lostRig struct {
	proxy *faultproxy.Proxy
	s     *Session
	ep    *Epoch
	ctx   context.Context
	p     string // the node written
}

func newLostRig(t *testing.T) *lostRig {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	r := &lostRig{proxy: faultproxy.Start(t, zkc.Server(0)), p: root + "/n",
		ctx: WithSuspendWait(context.Background(), time.Minute, time.Time{})}
	r.s = newTestSessionTimeout(t, []string{r.proxy.Addr()}, root, 20*time.Second)
	var err error
	if r.ep, err = r.s.Current(); err != nil {
		t.Fatal(err)
	}
	if err := r.ep.EnsurePersistent(r.ctx, root); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *lostRig) lost(outcome string) float64 {
	return promtest.ToFloat64(r.s.waits.lost.WithLabelValues(outcome))
}

// expect fails t unless the node holds data at version want.
func (r *lostRig) expect(t *testing.T, what string, want int32, data string) {
	t.Helper()
	got, st, err := r.ep.Get(r.ctx, r.p)
	if err != nil || st.Version != want || string(got) != data {
		t.Fatalf("%s: %q at version %v (%v), want %q at %d", what, got, st, err, data, want)
	}
}

// expectCounts fails t unless the lost answers were counted so, on the same
// session still connected.
func (r *lostRig) expectCounts(t *testing.T, applied, resent float64) {
	t.Helper()
	if a, s, u := r.lost("applied"), r.lost("resent"), r.lost("unknown"); a != applied || s != resent || u != 0 {
		t.Fatalf("lost answers: %v applied, %v resent, %v unknown; want %v, %v, 0", a, s, u, applied, resent)
	}
	if !r.ep.Connected() {
		t.Fatal("the session is not the same one connected")
	}
}

// A write applied whose answer is lost with its connection is adopted once
// the connection is back, and answered from the node: a create, a
// conditional set, a set at any version, a transaction, a delete.
func TestLostAnswerIsAdopted(t *testing.T) {
	r := newLostRig(t)
	ep, ctx, p := r.ep, r.ctx, r.p
	r.proxy.LoseAnswer(opCreate)
	if made, err := ep.CreateChecked(ctx, p, []byte("a"), Persistent); err != nil || made != p {
		t.Fatalf("create, answer lost: %q %v", made, err)
	}
	r.expect(t, "create, answer lost", 0, "a")
	r.proxy.LoseAnswer(opSetData)
	if st, err := ep.SetChecked(ctx, p, []byte("b"), 0); err != nil || st.Version != 1 {
		t.Fatalf("conditional set, answer lost: %v %v, want version 1", st, err)
	}
	r.proxy.LoseAnswer(opSetData)
	if st, err := ep.SetChecked(ctx, p, []byte("c"), -1); err != nil || st.Version != 2 {
		t.Fatalf("set, answer lost: %v %v, want version 2", st, err)
	}
	r.expect(t, "sets, answer lost", 2, "c")
	r.proxy.LoseAnswer(opMulti)
	res, err := ep.MultiChecked(ctx, SetOp{Path: p, Data: []byte("d"), Version: 2}, CheckOp{Path: path.Dir(p), Version: 0})
	if err != nil || len(res) != 2 || res[0].Stat == nil || res[0].Stat.Version != 3 {
		t.Fatalf("multi, answer lost: %+v %v, want the set at version 3", res, err)
	}
	r.proxy.LoseAnswer(opDelete)
	if err := ep.DeleteChecked(ctx, p, 3); err != nil {
		t.Fatalf("delete, answer lost: %v", err)
	}
	if ok, _, err := ep.Exists(ctx, p); ok || err != nil {
		t.Fatalf("deleted node: exists %v (%v)", ok, err)
	}
	r.expectCounts(t, 5, 0)
}

// A write the server never got (the request lost with its connection) is sent
// again once the connection is back, and answered as it then is: applied once,
// or refused when stale.
func TestLostRequestIsSentAgain(t *testing.T) {
	r := newLostRig(t)
	ep, ctx, p := r.ep, r.ctx, r.p
	r.proxy.LoseRequest(opCreate)
	if _, err := ep.CreateChecked(ctx, p, []byte("a"), Persistent); err != nil {
		t.Fatalf("create, request lost: %v", err)
	}
	r.proxy.LoseRequest(opSetData)
	if st, err := ep.SetChecked(ctx, p, []byte("b"), 0); err != nil || st.Version != 1 {
		t.Fatalf("conditional set, request lost: %v %v, want version 1", st, err)
	}
	r.proxy.LoseRequest(opSetData)
	if _, err := ep.SetChecked(ctx, p, []byte("x"), 0); !errors.Is(err, ErrBadVersion) {
		t.Fatalf("stale set, request lost: %v, want ErrBadVersion (sent again, refused)", err)
	}
	r.expect(t, "sets, request lost", 1, "b")
	r.proxy.LoseRequest(opDelete)
	if err := ep.DeleteChecked(ctx, p, 1); err != nil {
		t.Fatalf("delete, request lost: %v", err)
	}
	if ok, _, err := ep.Exists(ctx, p); ok || err != nil {
		t.Fatalf("deleted node: exists %v (%v)", ok, err)
	}
	r.expectCounts(t, 0, 4)
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
