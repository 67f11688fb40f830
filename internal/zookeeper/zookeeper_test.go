package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

func TestSortBySeqIgnoresPrefixes(t *testing.T) {
	in := []string{
		"_c_b-lock-0000000007",
		"9f8e__lock__0000000003", // kazoo
		"lock-0000000005",        // go-zookeeper without protection
		"_c_a-lock-0000000001",
		"readme", // not a contender
	}
	want := []string{"_c_a-lock-0000000001", "9f8e__lock__0000000003", "lock-0000000005", "_c_b-lock-0000000007"}
	if got := SortBySeq(in); !slices.Equal(got, want) {
		t.Fatalf("SortBySeq = %v, want %v", got, want)
	}
}

func newTestSession(t *testing.T, servers []string, root string) *Session {
	t.Helper()
	return newTestSessionTimeout(t, servers, root, 2*time.Second)
}

// newTestSessionTimeout is newTestSession with the session timeout given.
func newTestSessionTimeout(t *testing.T, servers []string, root string, timeout time.Duration) *Session {
	t.Helper()
	s, err := NewSession(Config{
		Servers: servers, Timeout: timeout, Root: root,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	deadline := time.Now().Add(30 * time.Second)
	for s.State() != StateConnected {
		if time.Now().After(deadline) {
			t.Fatal("session never connected")
		}
		select {
		case <-s.Changed():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return s
}

// A protected create whose reply is lost with the connection leaves exactly one
// node, adopted by the same session.
func TestProtectedCreateAdoptsAfterLostReply(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := newTestSession(t, []string{proxy.Addr()}, root)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	parent := path.Join(root, "locks", "lost-reply")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ep.EnsureContainer(ctx, parent); err != nil {
		t.Fatal(err)
	}
	proxy.DropReplies(1)
	made, err := ep.CreateProtected(ctx, parent, "lock-", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	node := made.Path
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	children, _, err := conn.Children(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 1 || parent+"/"+children[0] != node {
		t.Fatalf("children %v, want exactly the adopted %s", children, node)
	}
	_, st, err := conn.Exists(node)
	if err != nil || st.EphemeralOwner != ep.ID() {
		t.Fatalf("node owner %x, session %x (%v)", st.EphemeralOwner, ep.ID(), err)
	}
}

// A node with our guid made under another session is never adopted.
func TestProtectedNodeOfAnotherSessionIsNotAdopted(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := newTestSession(t, zkc.Servers(), root)
	ep, _ := s.Current()
	other := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	parent := path.Join(root, "locks", "foreign")
	ctx := context.Background()
	if err := ep.EnsureContainer(ctx, parent); err != nil {
		t.Fatal(err)
	}
	guid := NewGUID()
	if _, err := other.Create(parent+"/"+ProtectedPrefix(guid)+"lock-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	found, err := ep.FindProtected(ctx, parent, guid)
	if err != nil || found != "" {
		t.Fatalf("findProtected = %q, %v; want nothing adopted", found, err)
	}
}

// Two creates under one parent never share a transaction (they would share a
// czxid); requests are taken in arrival order and within the bounds.
func TestTakeTxnKeepsSiblingsApart(t *testing.T) {
	req := func(key string, ops int) *txnReq {
		r := &txnReq{key: key, bytes: 100 * ops}
		for range ops {
			r.ops = append(r.ops, DeleteOp{})
		}
		return r
	}
	cases := []struct {
		name    string
		pending []*txnReq
		want    int
	}{
		{"distinct parents", []*txnReq{req("/a", 2), req("/b", 2), req("", 1), req("/c", 2)}, 4},
		{"sibling stops the batch", []*txnReq{req("/a", 2), req("/b", 2), req("/a", 2), req("/c", 2)}, 2},
		{"deletes join anything", []*txnReq{req("", 1), req("", 1), req("/a", 2), req("", 1)}, 4},
		{"op bound", []*txnReq{req("", maxTxnOps-1), req("", 2)}, 1},
		{"one over the bound still goes", []*txnReq{req("", maxTxnOps+5)}, 1},
	}
	for _, c := range cases {
		if got := takeTxn(c.pending); got != c.want {
			t.Errorf("%s: takeTxn = %d, want %d", c.name, got, c.want)
		}
	}
}

// Concurrent stamped creates, many of them sharing transactions: each answer
// carries its own node's czxid and tells alone-ness right, siblings never share a
// czxid, and a refused op in a shared transaction fails only its own caller.
func TestSharedTransactionsKeepEachOutcome(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	s := newTestSession(t, zkc.Servers(), root)
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const distinct, siblings, refused = 40, 10, 10
	type result struct {
		parent string
		c      Created
		err    error
	}
	results := make(chan result, distinct+siblings)
	refusals := make(chan error, refused)
	var wg sync.WaitGroup
	for i := range distinct + siblings {
		parent := path.Join(root, "locks", fmt.Sprintf("p%d", i))
		if i >= distinct {
			parent = path.Join(root, "locks", "shared")
		}
		wg.Go(func() {
			c, err := ep.CreateProtected(ctx, parent, "lock-", nil, true)
			results <- result{parent, c, err}
		})
	}
	for i := range refused {
		wg.Go(func() {
			_, err := ep.SharedMulti(ctx, "", DeleteOp{Path: path.Join(root, fmt.Sprintf("missing-%d", i)), Version: -1})
			refusals <- err
		})
	}
	wg.Wait()
	close(results)
	close(refusals)
	for err := range refusals {
		if !errors.Is(err, zk.ErrNoNode) {
			t.Errorf("delete of a missing node: %v, want ErrNoNode", err)
		}
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	sharedCzxids := map[int64]bool{}
	alone := map[string]int{}
	for r := range results {
		if r.err != nil {
			t.Fatalf("create under %s: %v", r.parent, r.err)
		}
		_, st, err := conn.Exists(r.c.Path)
		if err != nil || st == nil {
			t.Fatalf("exists %s: %v", r.c.Path, err)
		}
		if r.c.Czxid != st.Czxid {
			t.Errorf("%s: stamped czxid %d, node's czxid %d", r.c.Path, r.c.Czxid, st.Czxid)
		}
		if r.c.Alone {
			alone[r.parent]++
		}
		if path.Base(r.parent) == "shared" {
			if sharedCzxids[st.Czxid] {
				t.Errorf("two siblings under %s share czxid %d", r.parent, st.Czxid)
			}
			sharedCzxids[st.Czxid] = true
		}
	}
	txns, requests := testutil.ToFloat64(s.metrics.txns), testutil.ToFloat64(s.metrics.txnRequests)
	t.Logf("%v requests in %v shared transactions", requests, txns)
	if txns >= requests {
		t.Errorf("%v requests in %v transactions: none was shared", requests, txns)
	}
	for i := range distinct {
		if p := path.Join(root, "locks", fmt.Sprintf("p%d", i)); alone[p] != 1 {
			t.Errorf("%s: %d creates reported alone, want 1", p, alone[p])
		}
	}
	if p := path.Join(root, "locks", "shared"); alone[p] != 1 {
		t.Errorf("%s: %d of %d siblings reported alone, want 1", p, alone[p], siblings)
	}
}

// A call whose write failed under a breaking connection gets the socket's own
// error from go-zookeeper: that is the connection's failure (unavailable, so a
// 503), not an answer and not the sidecar's fault (found by
// TestReconnectsUnderWatchesAndCalls: "write: connection reset by peer").
func TestSocketErrorsAreUnavailable(t *testing.T) {
	for _, err := range []error{
		&net.OpError{Op: "write", Net: "tcp", Err: syscall.ECONNRESET},
		io.EOF,
		fmt.Errorf("read: %w", net.ErrClosed),
	} {
		if got := mapError(err); !errors.Is(got, ErrUnavailable) {
			t.Errorf("mapError(%v) = %v, want ErrUnavailable", err, got)
		}
	}
	if got := mapError(zk.ErrNoNode); !errors.Is(got, ErrNoNode) || errors.Is(got, ErrUnavailable) {
		t.Errorf("mapError(ErrNoNode) = %v, want the answer as it is", got)
	}
}
