package main

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// things is a population of named things for the whole picture.
type things struct{ locks, elections, queues, barriers int }

func (n things) total() int { return n.locks + n.elections + n.queues + n.barriers }

// thingName is the name of the i-th thing of a kind ("lock-00042").
func thingName(kind string, i int) string { return fmt.Sprintf("%s-%05d", kind, i) }

// makeThings creates n straight in ZooKeeper under root, in the recipes'
// layouts, a few hundred creates per multi and a few multis at once: each lock
// held (an ephemeral contender of conn's session, its data the owner), each
// election with one candidate, each queue with one item, each barrier raised.
// The ephemeral nodes end with conn. It returns how long it took.
func makeThings(tb testing.TB, conn *zk.Conn, root string, n things) time.Duration {
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
	run(tb, conn, [][]any{ops})
	var batches [][]any
	ops = nil
	add := func(more ...any) {
		ops = append(ops, more...)
		if len(ops) >= 400 {
			batches, ops = append(batches, ops), nil
		}
	}
	for i := range n.locks {
		p := root + "/locks/" + thingName("lock", i)
		add(mk(p, nil, 0), mk(p+"/_c_"+fmt.Sprintf("%032x", i)+"-lock-", []byte("owner-"+fmt.Sprint(i)), zk.FlagEphemeral|zk.FlagSequence))
	}
	for i := range n.elections {
		p := root + "/elections/" + thingName("election", i)
		add(mk(p, nil, 0), mk(p+"/_c_"+fmt.Sprintf("%032x", i)+"-latch-", fmt.Appendf(nil, `{"candidate":"c-%d","value":"v"}`, i), zk.FlagEphemeral|zk.FlagSequence))
	}
	for i := range n.queues {
		p := root + "/queues/" + thingName("queue", i)
		add(mk(p, nil, 0), mk(p+"/p00", nil, 0), mk(p+"/p00/b0000000000", nil, 0), mk(p+"/p00/b0000000000/i0-test-", []byte("{}"), zk.FlagSequence))
	}
	for i := range n.barriers {
		add(mk(root+"/barriers/"+thingName("barrier", i), nil, 0))
	}
	if len(ops) > 0 {
		batches = append(batches, ops)
	}
	run(tb, conn, batches)
	return time.Since(start)
}

// run sends the batches as multis, four at a time.
func run(tb testing.TB, conn *zk.Conn, batches [][]any) {
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

// firstState reads st until it has shown every one of want things (and the
// session), and returns how long that took.
func firstState(tb testing.TB, st *sidecartest.Stream, want int, within time.Duration) time.Duration {
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

// awaitEvent reads st until an event cond accepts, within d, and returns how long it took.
func awaitEvent(t testing.TB, st *sidecartest.Stream, d time.Duration, what string, cond func(sidecartest.Event) bool) time.Duration {
	t.Helper()
	d = testutil.Patience(d)
	start := time.Now()
	for {
		left := d - time.Since(start)
		if left <= 0 {
			t.Fatalf("%s: not within %v", what, d)
		}
		if ev := st.Recv(t, left); cond(ev) {
			return time.Since(start)
		}
	}
}

// GET /v1/events with thousands of things: the first state arrives whole,
// without the stream being dropped, and changes (a new lock, a new leader, a
// barrier lowered) show within a second.
func TestEverythingStreamWithThousands(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	conn := zktest.Connect(t, zkc.Servers(), 10*time.Second)
	n := things{locks: 1800, elections: 600, queues: 300, barriers: 300}
	made := makeThings(t, conn, root, n)
	car := sidecartest.Start(t, zkc.Servers(), root)

	st := car.OpenStream(t, "/v1/events")
	took := firstState(t, st, n.total(), 60*time.Second)
	t.Logf("%d things made in %v; the first state complete after %v", n.total(), made, took)

	var shown []time.Duration
	for i := range 3 {
		lock := fmt.Sprint("fresh-", i)
		shown = append(shown, timed(func() {
			car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/"+lock+"?ttl=60s&owner=me")
		}, func() {
			awaitEvent(t, st, 5*time.Second, "lock "+lock+" held", func(ev sidecartest.Event) bool {
				return ev.Name == "lock" && ev.Data["name"] == lock && ev.Data["holder"] != nil
			})
		}))
	}
	election := thingName("election", 3)
	if _, err := conn.Create(root+"/elections/"+election+"/_c_"+fmt.Sprintf("%032x", 0)+"-latch-", []byte(`{"candidate":"second"}`), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, st, 5*time.Second, "a second candidate", func(ev sidecartest.Event) bool {
		c, _ := ev.Data["candidates"].([]any)
		return ev.Name == "leader" && ev.Data["name"] == election && len(c) == 2
	})
	barrier := thingName("barrier", 5)
	shown = append(shown, timed(func() {
		car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/barriers/"+barrier)
	}, func() {
		awaitEvent(t, st, 5*time.Second, "barrier lowered", func(ev sidecartest.Event) bool {
			return ev.Name == "barrier" && ev.Data["name"] == barrier && ev.Data["deleted"] == true
		})
	}))
	browsertest.LogLatency(t, "change shown on /v1/events", shown)
}

// timed runs do, then await, and returns how long both took.
func timed(do, await func()) time.Duration {
	start := time.Now()
	do()
	await()
	return time.Since(start)
}

// With nothing changing, the sidecar sends ZooKeeper nothing but its pings for
// the whole picture, whether one or ten clients follow it: counted on the
// server's side, on the sidecar's own connection (`cons`).
func TestEverythingStreamReadsNothingWhileIdle(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	conn := zktest.Connect(t, zkc.Servers(), 10*time.Second)
	n := things{locks: 300, elections: 100, queues: 50, barriers: 50}
	makeThings(t, conn, root, n)
	// A session timeout that a busy machine does not cut: a reconnect reads
	// everything again (rightly), which is not what is measured here.
	car := sidecartest.Start(t, zkc.Servers(), root, "--session-timeout", "10s")
	sid := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["sessionId"])
	server := zkc.Servers()[0]

	// idle is the least rate of three windows: a picture that reads while idle
	// reads in every window, while a reconnect (the server's count restarts
	// with the connection) or a stall of the machine spoils one at most.
	idle := func(what string) float64 {
		const window = 3 * time.Second
		least := -1.0
		for range 3 {
			before := zktest.Received(t, server, sid)
			time.Sleep(window) // a measuring window, not ordering
			n := zktest.Received(t, server, sid) - before
			if n < 0 {
				t.Logf("%s: the connection changed during a window; measured again", what)
				continue
			}
			if perSec := float64(n) / window.Seconds(); least < 0 || perSec < least {
				least = perSec
			}
		}
		if least < 0 {
			t.Fatalf("%s: the connection changed in every window", what)
		}
		t.Logf("%s: %.1f requests/s while idle (the least of three windows)", what, least)
		return least
	}
	none := idle("no follower") // the session's own heartbeat
	first := car.OpenStream(t, "/v1/events")
	firstState(t, first, n.total(), 30*time.Second)
	one := idle("1 follower")
	for range 9 {
		firstState(t, car.OpenStream(t, "/v1/events"), n.total(), 30*time.Second)
	}
	ten := idle("10 followers")
	// The old picture read 500 things 4 times a second (thousands of requests);
	// now the picture adds nothing to the session's heartbeat while idle.
	for _, r := range []float64{one, ten} {
		if r > none+1 {
			t.Errorf("%.1f requests/s while idle with %d things, %.1f/s with no follower: the picture reads while idle", r, n.total(), none)
		}
	}
}
