package sse_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

func TestSubscribeSnapshotFirst(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()

	if _, ok := b.Current("a"); ok {
		t.Fatal("Current of an unpublished topic reported a state")
	}
	b.Publish("a", ev("a", 1))
	b.Publish("a", ev("a", 2))
	if cur, ok := b.Current("a"); !ok || !sameEvent(cur, ev("a", 2)) {
		t.Fatalf("Current = %+v, %v; want event 2", cur, ok)
	}

	sub := b.Subscribe("a")
	defer sub.Close()
	if e := recv(t, sub.Events()); !sameEvent(e, ev("a", 2)) {
		t.Fatalf("first event = %+v, want the current state (id 2)", e)
	}
	noEvent(t, sub.Events())
	b.Publish("a", ev("a", 3))
	if e := recv(t, sub.Events()); !sameEvent(e, ev("a", 3)) {
		t.Fatalf("live event = %+v, want id 3", e)
	}

	// No state: the first event is the first one published.
	empty := b.Subscribe("b")
	defer empty.Close()
	noEvent(t, empty.Events())
	b.Publish("b", ev("b", 7))
	if e := recv(t, empty.Events()); !sameEvent(e, ev("b", 7)) {
		t.Fatalf("first event = %+v, want id 7", e)
	}

	// Forget drops the state, not the subscribers.
	b.Forget("a")
	if _, ok := b.Current("a"); ok {
		t.Fatal("Current reported a forgotten state")
	}
	later := b.Subscribe("a")
	defer later.Close()
	noEvent(t, later.Events())
	b.Publish("a", ev("a", 4))
	for _, s := range []*sse.Subscription{sub, later} {
		if e := recv(t, s.Events()); !sameEvent(e, ev("a", 4)) {
			t.Fatalf("after Forget got %+v, want id 4", e)
		}
	}
}

// The queue a subscription keeps until Events is called (the path Serve
// uses) gives the same snapshot-first order.
func TestSnapshotFirstPulled(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	b.Publish("a", ev("a", 1))
	sub := b.Subscribe("a")
	b.Publish("a", ev("a", 2))
	b.Publish("a", ev("a", 3))
	var got []string
	for len(got) < 3 {
		batch, ended := sse.Pull(sub, nil)
		if ended {
			t.Fatalf("subscription ended: %v", sub.Err())
		}
		for _, e := range batch {
			got = append(got, e.ID)
		}
	}
	if strings.Join(got, ",") != "1,2,3" {
		t.Fatalf("got ids %v, want 1,2,3", got)
	}
	// Switching to Events keeps what is waiting.
	b.Publish("a", ev("a", 4))
	if e := recv(t, sub.Events()); e.ID != "4" {
		t.Fatalf("got %+v, want id 4", e)
	}
	sub.Close()
	if _, ok := <-sub.Events(); ok {
		t.Fatal("Events not closed after Close")
	}
}

func TestSubscribeManyOrder(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	b.Publish("c", ev("c", 5))
	b.Publish("a", ev("a", 1))

	sub := b.SubscribeMany("a", "b", "c", "a")
	defer sub.Close()
	b.Publish("b", ev("b", 1))
	b.Publish("x", ev("x", 1)) // not subscribed
	b.Publish("a", ev("a", 2))
	b.Publish("c", ev("c", 6))
	// The snapshot in publish order (c before a), whatever the order given.
	want := []sse.Event{ev("c", 5), ev("a", 1), ev("b", 1), ev("a", 2), ev("c", 6)}
	for i, w := range want {
		if e := recv(t, sub.Events()); !sameEvent(e, w) {
			t.Fatalf("event %d = %s/%s, want %s/%s", i, e.Name, e.ID, w.Name, w.ID)
		}
	}
	noEvent(t, sub.Events())
}

// Subscribing many topics with states never overflows the buffer: the
// subscription gets room for its snapshots on top of Options.Buffer.
func TestSubscribeManySnapshotsDoNotCountAgainstBuffer(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{Buffer: 2})
	defer b.Close()
	var topics []string
	for i := range 10 {
		name := "t" + strconv.Itoa(i)
		topics = append(topics, name)
		b.Publish(name, ev(name, 1))
	}
	sub := b.SubscribeMany(topics...)
	defer sub.Close()
	b.Publish("t0", ev("t0", 2))
	b.Publish("t1", ev("t1", 2))
	if err := sub.Err(); err != nil {
		t.Fatalf("subscription with 10 states and 2 events waiting ended: %v", err)
	}
	b.Publish("t2", ev("t2", 2)) // the 13th waiting event: dropped
	waitDone(t, sub)
	if !errors.Is(sub.Err(), sse.ErrSlowSubscriber) {
		t.Fatalf("Err = %v, want ErrSlowSubscriber", sub.Err())
	}
}

// readConsecutive reads sub (through Events, or the way Serve does when
// pull is set) and checks that its ids are consecutive: the first is the
// state at subscription time (at least min), each next one is the previous
// plus one. It stops after count events or at id last, and returns the last
// id read.
func readConsecutive(sub *sse.Subscription, topic string, pull bool, min, count, last int) (int, error) {
	prev, n := 0, 0
	check := func(e sse.Event) error {
		id, err := strconv.Atoi(e.ID)
		if err != nil || e.Name != topic {
			return fmt.Errorf("bad event %+v", e)
		}
		switch {
		case n == 0 && id < min:
			return fmt.Errorf("%s: first event %d older than state %d at subscription", topic, id, min)
		case n > 0 && id != prev+1:
			return fmt.Errorf("%s: event %d after %d (lost or duplicated)", topic, id, prev)
		}
		prev = id
		n++
		return nil
	}
	var buf []sse.Event
	for n < count && prev < last {
		if pull {
			batch, ended := sse.Pull(sub, buf)
			if ended {
				return prev, fmt.Errorf("%s: subscription ended: %v", topic, sub.Err())
			}
			for _, e := range batch {
				if err := check(e); err != nil {
					return prev, err
				}
			}
			buf = batch
			continue
		}
		select {
		case e, ok := <-sub.Events():
			if !ok {
				return prev, fmt.Errorf("%s: subscription ended: %v", topic, sub.Err())
			}
			if err := check(e); err != nil {
				return prev, err
			}
		case <-time.After(wait):
			return prev, fmt.Errorf("%s: timed out after event %d", topic, prev)
		}
	}
	return prev, nil
}

// readCombined subscribes to every topic of names in one subscription and
// checks that each topic's ids are consecutive, until every topic reached last.
func readCombined(b *sse.Broker, names []string, last int) error {
	sub := b.SubscribeMany(names...)
	defer sub.Close()
	prev := map[string]int{}
	for done := 0; done < len(names); {
		var e sse.Event
		select {
		case got, ok := <-sub.Events():
			if !ok {
				return fmt.Errorf("combined: ended: %v", sub.Err())
			}
			e = got
		case <-time.After(wait):
			return fmt.Errorf("combined: timed out at %v", prev)
		}
		id, _ := strconv.Atoi(e.ID)
		if p, seen := prev[e.Name]; seen && id != p+1 {
			return fmt.Errorf("combined: %s event %d after %d", e.Name, id, p)
		}
		prev[e.Name] = id
		if id == last {
			done++
		}
	}
	return nil
}

func TestNoLossOrDuplicateUnderConcurrentPublish(t *testing.T) {
	noLeaks(t)
	const (
		topics       = 4
		events       = 2000
		subsPerTopic = 6
	)
	// A buffer as large as the run: under the race detector a consumer
	// may fall far behind, and a drop is not what is tested here. (The
	// buffer grows only as events wait.)
	b := sse.NewBroker(sse.Options{Buffer: topics * events})
	defer b.Close()

	var published [topics]atomic.Int64
	names := make([]string, topics)
	for i := range names {
		names[i] = "topic" + strconv.Itoa(i)
	}
	start, quarter := make(chan struct{}), make(chan struct{})
	errs := make(chan error, topics*(subsPerTopic+1)+1)
	var wg sync.WaitGroup
	for ti, name := range names {
		wg.Go(func() {
			<-start
			for id := 1; id <= events; id++ {
				b.Publish(name, ev(name, id))
				published[ti].Store(int64(id))
				if ti == 0 && id == events/4 {
					close(quarter)
				}
			}
		})
		for si := range subsPerTopic {
			wg.Go(func() {
				<-start
				// Subscribe, read a few, unsubscribe; again; the last
				// round reads to the end.
				for round := 0; ; round++ {
					count := events
					if round < 4 {
						count = 1 + (si*37+round*101)%150
					}
					before := int(published[ti].Load())
					sub := b.Subscribe(name)
					last, err := readConsecutive(sub, name, si%2 == 0, max(before, 1), count, events)
					sub.Close()
					if err != nil {
						errs <- err
						return
					}
					if last == events {
						return
					}
				}
			})
		}
	}
	// One combined stream over every topic, subscribed mid-run.
	wg.Go(func() {
		<-quarter
		if err := readCombined(b, names, events); err != nil {
			errs <- err
		}
	})

	close(start)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(4 * wait):
		t.Fatal("stress test did not finish")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestSlowSubscriberDropped(t *testing.T) {
	for _, mode := range []string{"pulled", "events"} {
		t.Run(mode, func(t *testing.T) {
			noLeaks(t)
			const buffer, events = 4, 200
			reg := prometheus.NewRegistry()
			b := sse.NewBroker(sse.Options{Buffer: buffer, Registerer: reg})
			defer b.Close()

			slow := b.Subscribe("t") // never read
			if mode == "events" {
				_ = slow.Events()
			}
			fast := b.Subscribe("t")
			// The fast subscriber reads each event as it comes; the slow
			// one never reads. Publishing runs on its own goroutine so that
			// a Publish that blocked would fail the test, not hang it.
			result := make(chan error, 1)
			go func() {
				for id := 1; id <= events; id++ {
					b.Publish("t", ev("t", id))
					select {
					case e := <-fast.Events():
						if e.ID != strconv.Itoa(id) {
							result <- fmt.Errorf("fast subscriber got id %s, want %d", e.ID, id)
							return
						}
					case <-time.After(wait):
						result <- fmt.Errorf("fast subscriber did not get event %d", id)
						return
					}
				}
				result <- nil
			}()
			select {
			case err := <-result:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * wait):
				t.Fatal("Publish blocked on a slow subscriber")
			}
			waitDone(t, slow)
			if !errors.Is(slow.Err(), sse.ErrSlowSubscriber) {
				t.Fatalf("slow Err = %v, want ErrSlowSubscriber", slow.Err())
			}
			if err := fast.Err(); err != nil {
				t.Fatalf("fast Err = %v", err)
			}
			want := `
# HELP coord_sse_dropped_total Server-sent event subscriptions disconnected for falling behind.
# TYPE coord_sse_dropped_total counter
coord_sse_dropped_total 1
# HELP coord_sse_subscribers Live server-sent event subscriptions.
# TYPE coord_sse_subscribers gauge
coord_sse_subscribers 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
				t.Fatal(err)
			}
			fast.Close()
			if err := testutil.GatherAndCompare(reg, strings.NewReader(strings.Replace(want, "subscribers 1", "subscribers 0", 1))); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Two brokers on one registry share the metrics instead of panicking.
func TestSharedRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	b1 := sse.NewBroker(sse.Options{Registerer: reg})
	b2 := sse.NewBroker(sse.Options{Registerer: reg})
	s1, s2 := b1.Subscribe("a"), b2.Subscribe("a")
	want := `
# HELP coord_sse_subscribers Live server-sent event subscriptions.
# TYPE coord_sse_subscribers gauge
coord_sse_subscribers 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "coord_sse_subscribers"); err != nil {
		t.Fatal(err)
	}
	s1.Close()
	s2.Close()
	b1.Close()
	b2.Close()
}

type activeLog struct {
	mu    sync.Mutex
	calls []string
	ch    chan string
}

func (l *activeLog) record(topic string, active bool) {
	s := fmt.Sprintf("%s:%v", topic, active)
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
	select {
	case l.ch <- s:
	default:
	}
}

func (l *activeLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func TestOnActive(t *testing.T) {
	noLeaks(t)
	log := &activeLog{ch: make(chan string, 100)}
	var b *sse.Broker
	b = sse.NewBroker(sse.Options{Buffer: 1, OnActive: func(topic string, active bool) {
		// Would deadlock if called with the broker's lock held.
		_, _ = b.Current(topic)
		log.record(topic, active)
	}})
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			select {
			case got := <-log.ch:
				if got != w {
					t.Fatalf("OnActive call %s, want %s (all: %v)", got, w, log.all())
				}
			case <-time.After(wait):
				t.Fatalf("no OnActive call, want %s (all: %v)", w, log.all())
			}
		}
	}

	s1 := b.Subscribe("a")
	expect("a:true")
	s2 := b.Subscribe("a")
	s1.Close()
	s1.Close()
	s2.Close()
	expect("a:false")

	s3 := b.SubscribeMany("a", "b")
	expect("a:true", "b:true")
	s4 := b.Subscribe("b")
	s3.Close()
	expect("a:false")

	b.Publish("b", ev("b", 1)) // fills s4's buffer of one
	b.Publish("b", ev("b", 2)) // drops s4, the last subscriber of b
	waitDone(t, s4)
	expect("b:false")

	s5 := b.Subscribe("c")
	_ = b.Subscribe("c")
	expect("c:true")
	b.Close() // returns after every OnActive call returned
	want := []string{"a:true", "a:false", "a:true", "b:true", "a:false", "b:false", "c:true", "c:false"}
	if got := log.all(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("OnActive calls\n got %v\nwant %v", got, want)
	}
	if !errors.Is(s5.Err(), sse.ErrClosed) {
		t.Fatalf("Err after broker Close = %v, want ErrClosed", s5.Err())
	}
	after := b.Subscribe("d")
	waitDone(t, after)
	if !errors.Is(after.Err(), sse.ErrClosed) {
		t.Fatalf("Subscribe after Close: Err = %v, want ErrClosed", after.Err())
	}
	if got := log.all(); len(got) != len(want) {
		t.Fatalf("OnActive called after Close: %v", got[len(want):])
	}
	b.Close() // idempotent
}

// Under concurrent subscribe and unsubscribe, each topic's OnActive calls
// alternate true, false, ..., false.
func TestOnActiveOrderUnderConcurrency(t *testing.T) {
	noLeaks(t)
	var mu sync.Mutex
	calls := map[string][]bool{}
	b := sse.NewBroker(sse.Options{OnActive: func(topic string, active bool) {
		mu.Lock()
		calls[topic] = append(calls[topic], active)
		mu.Unlock()
	}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				topic := "t" + strconv.Itoa((g+i)%3)
				s := b.Subscribe(topic)
				if i%5 == 0 {
					b.Publish(topic, ev(topic, i))
				}
				s.Close()
			}
		})
	}
	wg.Wait()
	b.Close()
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 3 {
		t.Fatalf("OnActive topics: %v", calls)
	}
	for topic, seq := range calls {
		if len(seq)%2 != 0 {
			t.Errorf("%s: odd number of calls (%d)", topic, len(seq))
		}
		for i, active := range seq {
			if active != (i%2 == 0) {
				t.Errorf("%s: call %d is %v, want alternating starting with true", topic, i, active)
				break
			}
		}
	}
}

func TestSubscriptionLifecycle(t *testing.T) {
	noLeaks(t)
	b := sse.NewBroker(sse.Options{})
	b.Publish("a", ev("a", 1))

	sub := b.Subscribe("a")
	if sub.Err() != nil {
		t.Fatalf("live Err = %v", sub.Err())
	}
	select {
	case <-sub.Done():
		t.Fatal("Done closed on a live subscription")
	default:
	}
	sub.Close()
	sub.Close()
	waitDone(t, sub)
	if !errors.Is(sub.Err(), sse.ErrUnsubscribed) {
		t.Fatalf("Err = %v, want ErrUnsubscribed", sub.Err())
	}
	if _, ok := <-sub.Events(); ok {
		t.Fatal("Events of an unsubscribed subscription delivered an event")
	}

	// Close keeps what was published before it, and says ErrClosed.
	live := b.Subscribe("a")
	b.Publish("a", ev("a", 2))
	b.Close()
	waitDone(t, live)
	if !errors.Is(live.Err(), sse.ErrClosed) {
		t.Fatalf("Err = %v, want ErrClosed", live.Err())
	}
	var ids []string
	for e := range live.Events() {
		ids = append(ids, e.ID)
	}
	if strings.Join(ids, ",") != "1,2" {
		t.Fatalf("buffered events after Close = %v, want 1,2", ids)
	}
	live.Close() // no effect on an ended subscription
	if !errors.Is(live.Err(), sse.ErrClosed) {
		t.Fatalf("Err after Close = %v, want ErrClosed", live.Err())
	}
}

func TestData(t *testing.T) {
	got, err := sse.Data(map[string]any{"s": "two\nlines", "raw": []byte("x")})
	if err != nil || string(got) != `{"raw":"eA==","s":"two\nlines"}` {
		t.Fatalf("Data = %s, %v", got, err)
	}
	got, err = sse.Data(json.RawMessage("{\n  \"a\": 1\n}"))
	if err != nil || string(got) != `{"a":1}` {
		t.Fatalf("Data(raw) = %q, %v; want compacted", got, err)
	}
	if _, err := sse.Data(func() {}); err == nil {
		t.Fatal("Data(func) did not fail")
	}
}

// A keyed topic gives a new subscriber every key's current state first, then the
// live feed; ForgetKeyed drops a key.
func TestPublishKeyedSnapshotsEveryKey(t *testing.T) {
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	b.PublishKeyed("all", "lock/b", sse.Event{ID: "1", Name: "lock", Data: []byte(`"b1"`)})
	b.PublishKeyed("all", "lock/a", sse.Event{ID: "2", Name: "lock", Data: []byte(`"a1"`)})
	b.PublishKeyed("all", "lock/b", sse.Event{ID: "3", Name: "lock", Data: []byte(`"b2"`)})
	b.PublishKeyed("all", "lock/c", sse.Event{ID: "4", Name: "lock", Data: []byte(`"c1"`)})
	b.ForgetKeyed("all", "lock/c", sse.Event{ID: "5", Name: "lock", Data: []byte(`{"deleted":true}`)})
	sub := b.Subscribe("all")
	defer sub.Close()
	ch := sub.Events()
	for _, want := range []string{`"a1"`, `"b2"`} {
		select {
		case e := <-ch:
			if string(e.Data) != want {
				t.Fatalf("snapshot event %s, want %s", e.Data, want)
			}
		case <-time.After(time.Second):
			t.Fatal("no snapshot event")
		}
	}
	b.PublishKeyed("all", "lock/a", sse.Event{ID: "6", Name: "lock", Data: []byte(`"a2"`)})
	select {
	case e := <-ch:
		if string(e.Data) != `"a2"` {
			t.Fatalf("live event %s", e.Data)
		}
	case <-time.After(time.Second):
		t.Fatal("no live event")
	}
}

// A new subscriber gets the current states in the order they were published,
// across keys and across the topics of SubscribeMany, so ids that the publisher
// assigns in increasing order never go backwards in its snapshot.
func TestSnapshotKeepsPublishOrder(t *testing.T) {
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	b.PublishKeyed("all", "lock/z", sse.Event{ID: "1", Name: "lock", Data: []byte(`"z1"`)})
	b.PublishKeyed("all", "lock/a", sse.Event{ID: "2", Name: "lock", Data: []byte(`"a1"`)})
	b.PublishKeyed("all", "lock/m", sse.Event{ID: "3", Name: "lock", Data: []byte(`"m1"`)})
	b.PublishKeyed("all", "lock/z", sse.Event{ID: "4", Name: "lock", Data: []byte(`"z2"`)})
	b.Publish("group", sse.Event{ID: "1", Name: "throughput", Data: []byte(`"v1"`)})
	b.Publish("group-leader", sse.Event{ID: "2", Name: "leader", Data: []byte(`"l1"`)})
	b.Publish("group", sse.Event{ID: "3", Name: "throughput", Data: []byte(`"v2"`)})
	for _, c := range []struct {
		topics []string
		want   []string
	}{
		{[]string{"all"}, []string{"2", "3", "4"}},
		{[]string{"group", "group-leader"}, []string{"2", "3"}},
		{[]string{"group-leader", "group"}, []string{"2", "3"}},
	} {
		sub := b.SubscribeMany(c.topics...)
		ch := sub.Events()
		var got []string
		for range c.want {
			select {
			case e := <-ch:
				got = append(got, e.ID)
			case <-time.After(time.Second):
				t.Fatalf("%v: no snapshot event after %v", c.topics, got)
			}
		}
		sub.Close()
		if !slices.Equal(got, c.want) {
			t.Fatalf("%v: snapshot ids %v, want %v", c.topics, got, c.want)
		}
	}
}

// A filtered subscriber gets the snapshot and the events of the keys it keeps,
// and every unkeyed event; the others are never queued for it.
func TestSubscribeFiltered(t *testing.T) {
	b := sse.NewBroker(sse.Options{})
	defer b.Close()
	b.PublishKeyed("all", "lock/mine-1", sse.Event{ID: "1", Name: "lock", Data: []byte(`"m1"`)})
	b.PublishKeyed("all", "lock/theirs", sse.Event{ID: "2", Name: "lock", Data: []byte(`"t1"`)})
	keep := func(key string) bool { return key == "session" || strings.HasPrefix(key, "lock/mine-") }
	sub := b.SubscribeFiltered(keep, "all")
	defer sub.Close()
	all := b.Subscribe("all")
	defer all.Close()
	ch := sub.Events()
	if e := recv(t, ch); string(e.Data) != `"m1"` {
		t.Fatalf("snapshot %s", e.Data)
	}
	noEvent(t, ch)
	b.PublishKeyed("all", "lock/theirs", sse.Event{ID: "3", Name: "lock", Data: []byte(`"t2"`)})
	b.ForgetKeyed("all", "lock/theirs", sse.Event{ID: "4", Name: "lock", Data: []byte(`"t-gone"`)})
	noEvent(t, ch)
	b.PublishKeyed("all", "session", sse.Event{ID: "5", Name: "session", Data: []byte(`"s"`)})
	b.Publish("all", sse.Event{ID: "6", Name: "x", Data: []byte(`"unkeyed"`)})
	b.ForgetKeyed("all", "lock/mine-1", sse.Event{ID: "7", Name: "lock", Data: []byte(`"m-gone"`)})
	for _, want := range []string{`"s"`, `"unkeyed"`, `"m-gone"`} {
		if e := recv(t, ch); string(e.Data) != want {
			t.Fatalf("got %s, want %s", e.Data, want)
		}
	}
	noEvent(t, ch)
	// The unfiltered one, read the way Serve reads, takes each key once in its
	// latest state (the farewells), and every unkeyed event, in publish order.
	evs, _ := sse.Pull(all, nil)
	var got []string
	for _, e := range evs {
		got = append(got, string(e.Data))
	}
	if want := []string{`"t-gone"`, `"s"`, `"unkeyed"`, `"m-gone"`}; !slices.Equal(got, want) {
		t.Fatalf("the unfiltered subscriber got %v, want %v", got, want)
	}
}
