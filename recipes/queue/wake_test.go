package queue

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A taker lists a queue that does not exist yet (no node: no children watch
// can be left on it), then arms an existence watch. When the queue is made in
// between, that watch is on a node that exists: it fires only when the node
// itself changes or goes, never when an item is added below it. So the taker
// must be woken to list the queue now; without it, a waiting take sleeps
// through the item to the end of its wait (issue 22: "waiting take got <nil>").
func TestTakerWokenWhenQueueAppearsBeforeItsWatch(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	b := newQueueEnv(t, zkc.Servers(), root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// b's listing found no node; then a makes the queue with its item, and b arms
	// its existence watch on the queue that exists now.
	mustEnqueue(t, a.q, "late", 0, "", "x")
	st := b.q.state("late")
	changed := st.changedCh()
	ep, err := b.s.Current()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.awaitQueue(ctx, ep, b.q.qpath("late")); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("the queue appeared before the existence watch, and waiting takers were not woken to list it")
	}
	if d := takeData(t, b.q, "late"); d != "x" {
		t.Fatalf("take after the wake-up: %q", d)
	}
}

// Takers that start waiting on queues not made yet, each racing the enqueue of
// its queue's first item on another sidecar, all get their item: no interleaving
// of the taker's first listing, its watches and the queue's creation (node by
// node: queue, priority, bucket, item) leaves a taker asleep. wakeRaces queues
// at once, so that some creations land inside a taker's listing.
func TestWaitingTakersRacingTheFirstEnqueueAllWake(t *testing.T) {
	const wakeRaces = 64
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := newQueueEnv(t, zkc.Servers(), root)
	b := newQueueEnv(t, zkc.Servers(), root)
	var wg sync.WaitGroup
	missed := make(chan string, wakeRaces)
	for i := range wakeRaces {
		name := fmt.Sprint("race-", i)
		wg.Add(2)
		go func() {
			defer wg.Done()
			// The wait only bounds a failure: a woken taker returns at once.
			it, err := b.q.Take(context.Background(), name, 60*time.Second)
			if err != nil || it == nil || string(it.Data) != name {
				missed <- fmt.Sprintf("%s: %+v, %v", name, it, err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := a.q.Enqueue(context.Background(), name, 0, "", []byte(name)); err != nil {
				missed <- fmt.Sprintf("%s: enqueue: %v", name, err)
			}
		}()
	}
	wg.Wait()
	close(missed)
	for m := range missed {
		t.Error("taker not woken by the first enqueue:", m)
	}
}

// A listing of claims/ sent before this sidecar released a claim, and answered
// after, does not make the released item claimed again: released, it is first
// in line at once (TestClaimsExpireAckAndRelease's "claim after release" once
// got nothing under stress-ng). A listing sent after the release counts it as
// claimed when it is (claimed again, elsewhere).
func TestStaleClaimsListingDoesNotHideAReleasedItem(t *testing.T) {
	zkc := zktest.Shared(t)
	env := newQueueEnv(t, zkc.Servers(), zktest.Root(t))
	st := env.q.state("jobs")
	st.setClaimed([]string{"item-a", "item-b"}, st.unclaimCount())
	sent := st.unclaimCount() // a listing is sent...
	st.unclaim(itemRef{key: "item-a"}, false)
	st.setClaimed([]string{"item-a", "item-b"}, sent) // ...and answered after the release
	st.mu.Lock()
	stale, other := st.claimed["item-a"], st.claimed["item-b"]
	st.mu.Unlock()
	if stale || !other {
		t.Fatalf("after a listing sent before the release: item-a claimed %v (want false), item-b %v (want true)", stale, other)
	}
	st.setClaimed([]string{"item-a"}, st.unclaimCount()) // sent after the release
	st.mu.Lock()
	again, gone := st.claimed["item-a"], st.claimed["item-b"]
	st.mu.Unlock()
	if !again || gone {
		t.Fatalf("after a listing sent after the release: item-a claimed %v (want true), item-b %v (want false)", again, gone)
	}
}
