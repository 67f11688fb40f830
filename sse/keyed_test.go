package sse_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// pullAll pulls sub until want events arrived (failing after a batch that is
// not the last yet leaves it ended), checking that no batch is empty or larger
// than the broker's batch.
func pullAll(t *testing.T, sub *sse.Subscription, want int) []sse.Event {
	t.Helper()
	var all []sse.Event
	for len(all) < want {
		batch, ended := sse.Pull(sub, nil)
		if len(batch) > 256 {
			t.Fatalf("a batch of %d events", len(batch))
		}
		all = append(all, batch...)
		if ended && len(all) < want {
			t.Fatalf("ended (%v) after %d of %d events", sub.Err(), len(all), want)
		}
	}
	return all
}

// A keyed topic with far more keys than the buffer gives a new subscriber every
// key's state, in publish order, without dropping it; and a subscriber that does
// not read while every key changes many times is not dropped either: it then
// takes each key once, in its latest state.
func TestKeyedTopicCoalescesInsteadOfDropping(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{Buffer: 2})
	defer b.Close()
	const keys = 10000
	id := 0
	publish := func(k int, round string) {
		id++
		b.PublishKeyed("all", "lock/"+strconv.Itoa(k), sse.Event{ID: strconv.Itoa(id), Name: "lock", Data: []byte(`"` + round + `"`)})
	}
	for k := range keys {
		publish(k, "r0")
	}
	sub := b.Subscribe("all")
	defer sub.Close()
	first := pullAll(t, sub, keys)
	if len(first) != keys {
		t.Fatalf("first state: %d events, want %d", len(first), keys)
	}
	ids := make([]int, len(first))
	for i, e := range first {
		ids[i], _ = strconv.Atoi(e.ID)
	}
	if !slices.IsSorted(ids) {
		t.Fatal("the first state is not in publish order")
	}
	for round := 1; round <= 5; round++ {
		for k := range keys {
			publish(k, "r"+strconv.Itoa(round))
		}
	}
	if err := sub.Err(); err != nil {
		t.Fatalf("a subscriber that did not read for 50,000 changes ended: %v", err)
	}
	next := pullAll(t, sub, keys)
	for _, e := range next {
		if string(e.Data) != `"r5"` {
			t.Fatalf("coalesced state %s, want the latest", e.Data)
		}
	}
	publish(7, "r6")
	if got := pullAll(t, sub, 1); len(got) != 1 || string(got[0].Data) != `"r6"` {
		t.Fatalf("live change: %v", got)
	}
}

// Farewells: a subscriber that may have seen a key gets its farewell, a later
// subscriber does not; farewells do not pile up once every subscriber took them.
func TestKeyedFarewells(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	for i := range 100 {
		b.PublishKeyed("all", fmt.Sprint("k", i), sse.Event{Name: "x", Data: []byte(`"on"`)})
	}
	old := b.Subscribe("all")
	defer old.Close()
	pullAll(t, old, 100)
	for i := range 100 {
		b.ForgetKeyed("all", fmt.Sprint("k", i), sse.Event{Name: "x", Data: []byte(`"off"`)})
	}
	b.PublishKeyed("all", "k-new", sse.Event{Name: "x", Data: []byte(`"new"`)})
	if got := pullAll(t, old, 101); len(got) != 101 || string(got[0].Data) != `"off"` || string(got[100].Data) != `"new"` {
		t.Fatalf("the old subscriber got %d events", len(got))
	}
	later := b.Subscribe("all")
	defer later.Close()
	if got := pullAll(t, later, 1); len(got) != 1 || string(got[0].Data) != `"new"` {
		t.Fatalf("a later subscriber got %d events, first %s", len(got), got[0].Data)
	}
	if n := sse.Farewells(b, "all"); n > 64 {
		t.Fatalf("%d farewells kept after every subscriber took them", n)
	}
}
