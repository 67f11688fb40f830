package sidecartest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/go-zookeeper/zk"
)

// Things is a population of named things for the whole picture (GET /v1/events
// and the status page).
type Things struct{ Locks, Elections, Queues, Barriers int }

// Total is how many things n holds.
func (n Things) Total() int { return n.Locks + n.Elections + n.Queues + n.Barriers }

// ThingName is the name of the i-th thing of a kind ("lock-00042").
func ThingName(kind string, i int) string { return fmt.Sprintf("%s-%05d", kind, i) }

// MakeThings creates n straight in ZooKeeper under root, in the recipes'
// layouts, a few hundred creates per multi and a few multis at once: each lock
// held (an ephemeral contender of conn's session, its data the owner), each
// election with one candidate, each queue with one item, each barrier raised.
// The ephemeral nodes end with conn. It returns how long it took.
func MakeThings(tb testing.TB, conn *zk.Conn, root string, n Things) time.Duration {
	tb.Helper()
	start := time.Now()
	acl := zk.WorldACL(zk.PermAll)
	mk := func(p string, data []byte, flags int32) *zk.CreateRequest {
		return &zk.CreateRequest{Path: p, Data: data, Acl: acl, Flags: flags}
	}
	var ops []any
	ops = append(ops, mk(root, nil, 0))
	for _, d := range []string{"locks", "elections", "queues", "barriers"} {
		ops = append(ops, mk(root+"/"+d, nil, 0))
	}
	runMultis(tb, conn, [][]any{ops})
	var batches [][]any
	ops = nil
	add := func(more ...any) {
		ops = append(ops, more...)
		if len(ops) >= 400 {
			batches, ops = append(batches, ops), nil
		}
	}
	for i := range n.Locks {
		p := root + "/locks/" + ThingName("lock", i)
		add(mk(p, nil, 0), mk(p+"/_c_"+fmt.Sprintf("%032x", i)+"-lock-", []byte("owner-"+fmt.Sprint(i)), zk.FlagEphemeral|zk.FlagSequence))
	}
	for i := range n.Elections {
		p := root + "/elections/" + ThingName("election", i)
		add(mk(p, nil, 0), mk(p+"/_c_"+fmt.Sprintf("%032x", i)+"-latch-", fmt.Appendf(nil, `{"candidate":"c-%d","value":"v"}`, i), zk.FlagEphemeral|zk.FlagSequence))
	}
	for i := range n.Queues {
		p := root + "/queues/" + ThingName("queue", i)
		add(mk(p, nil, 0), mk(p+"/p00", nil, 0), mk(p+"/p00/b0000000000", nil, 0), mk(p+"/p00/b0000000000/i0-test-", []byte("{}"), zk.FlagSequence))
	}
	for i := range n.Barriers {
		add(mk(root+"/barriers/"+ThingName("barrier", i), nil, 0))
	}
	if len(ops) > 0 {
		batches = append(batches, ops)
	}
	runMultis(tb, conn, batches)
	return time.Since(start)
}

// runMultis sends the batches as multis, four at a time.
func runMultis(tb testing.TB, conn *zk.Conn, batches [][]any) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(batches))
	sem := make(chan struct{}, 4)
	for _, b := range batches {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := conn.Multi(b...); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		tb.Fatalf("creating the things: %v", err)
	}
}

// FirstState reads st (a GET /v1/events stream) until it has shown every one
// of want things (and the session), and returns how long that took; it fails
// tb past within (made testutil.Patience).
func FirstState(tb testing.TB, st *Stream, want int, within time.Duration) time.Duration {
	tb.Helper()
	within = testutil.Patience(within)
	start := time.Now()
	seen := map[string]bool{}
	session := false
	for len(seen) < want || !session {
		left := within - time.Since(start)
		if left <= 0 {
			tb.Fatalf("the first state showed %d of %d things within %v", len(seen), want, within)
		}
		ev := st.Recv(tb, left)
		if ev.Name == "session" {
			session = true
			continue
		}
		name, _ := ev.Data["name"].(string)
		if name == "" {
			name, _ = ev.Data["group"].(string)
		}
		seen[ev.Name+"/"+name] = true
	}
	return time.Since(start)
}
