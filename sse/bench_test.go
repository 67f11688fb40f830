package sse_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// BenchmarkPublish10000Subscribers publishes to one topic with 10,000
// subscribers, each drained by its own consumer goroutine the way Serve
// drains it. ns/op is the time from Publish until all 10,000 consumers have
// the event; publish-ns/op is the part spent inside Publish, that is holding
// the broker's lock; B/subscriber is the heap one idle subscription costs
// (its current-state snapshot included).
func BenchmarkPublish10000Subscribers(b *testing.B) {
	const subscribers = 10000
	br := sse.NewBroker(sse.Options{})
	defer br.Close()
	br.Publish("t", ev("t", 0))
	event := ev("t", 1)
	subs := make([]*sse.Subscription, subscribers)

	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	for i := range subs {
		subs[i] = br.Subscribe("t")
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	perSub := (float64(ms.HeapAlloc) - float64(before)) / subscribers

	// pending counts events not yet received in this round; the consumer
	// that takes it to zero ends the round.
	var pending atomic.Int64
	roundDone := make(chan struct{}, 1)
	pending.Store(subscribers) // the snapshots
	var wg sync.WaitGroup
	for _, sub := range subs {
		wg.Go(func() {
			var buf []sse.Event
			for {
				events, ended := sse.Pull(sub, buf)
				if len(events) > 0 && pending.Add(-int64(len(events))) == 0 {
					roundDone <- struct{}{}
				}
				if ended {
					return
				}
				buf = events
			}
		})
	}
	<-roundDone

	var inPublish time.Duration
	b.ResetTimer()
	for range b.N {
		pending.Store(subscribers)
		start := time.Now()
		br.Publish("t", event)
		inPublish += time.Since(start)
		<-roundDone
	}
	b.StopTimer()

	for _, sub := range subs {
		if err := sub.Err(); err != nil {
			b.Fatalf("a subscriber ended: %v", err)
		}
	}
	b.ReportMetric(float64(inPublish.Nanoseconds())/float64(b.N), "publish-ns/op")
	b.ReportMetric(perSub, "B/subscriber")
	for _, sub := range subs {
		sub.Close()
	}
	wg.Wait()
}
