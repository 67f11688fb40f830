package sse_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
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

// A subscription numbered by NumberFrom gives its events ids of its own, from
// the number given on: read by Pull, through Events, or written to a hijacked
// socket by the broker's flushers, a filtered subscriber's ids have no gaps
// where the keys it may not see changed, whatever ids (or none) the publisher
// gave.
func TestNumberFromGivesASubscriberItsOwnIDs(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	keepA := func(key string) bool { return strings.HasPrefix(key, "a/") }
	publish := func(key, id string) {
		b.PublishKeyed("all", key, sse.Event{ID: id, Name: "x", Data: []byte(`"` + key + `"`)})
	}
	ids := func(events []sse.Event) []string {
		var out []string
		for _, e := range events {
			out = append(out, e.ID+" "+string(e.Data))
		}
		return out
	}
	publish("a/1", "1")
	publish("b/1", "2")
	publish("a/2", "") // no id of its own

	pulled := b.SubscribeFiltered(keepA, "all")
	defer pulled.Close()
	pulled.NumberFrom(41)
	if got, want := ids(pullAll(t, pulled, 2)), []string{`42 "a/1"`, `43 "a/2"`}; !slices.Equal(got, want) {
		t.Fatalf("pulled first state %v, want %v", got, want)
	}

	channel := b.SubscribeFiltered(keepA, "all")
	defer channel.Close()
	channel.NumberFrom(0)
	events := channel.Events()

	h := serveHijacked(t, b, hijackOptions{subscribe: func(topic string) *sse.Subscription {
		sub := b.SubscribeFiltered(keepA, topic)
		sub.NumberFrom(7)
		return sub
	}})
	c, _ := h.dial(t, "all", 0)
	c.expect(t, 8)
	c.expect(t, 9)

	publish("b/2", "4")
	publish("b/1", "5")
	publish("a/1", "")
	if got, want := ids(pullAll(t, pulled, 1)), []string{`44 "a/1"`}; !slices.Equal(got, want) {
		t.Fatalf("pulled live %v, want %v", got, want)
	}
	for i, want := range []string{`1 "a/1"`, `2 "a/2"`, `3 "a/1"`} {
		if got := ids([]sse.Event{recv(t, events)}); got[0] != want {
			t.Fatalf("channel event %d: %s, want %s", i, got[0], want)
		}
	}
	if got, want := c.lines(t).event(t), "id: 10\nevent: x\ndata: \"a/1\""; got != want {
		t.Fatalf("hijacked live event\n%s\nwant\n%s", got, want)
	}
}
