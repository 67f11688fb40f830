package sse

import (
	"strconv"
	"testing"
	"time"
)

// A subscription told SkipThrough(N) leaves out the events whose decimal ids
// are at most N, snapshot and live alike, and gives every later one, whether
// read through Events or taken as Serve takes.
func TestSkipThrough(t *testing.T) {
	for _, byChannel := range []bool{true, false} {
		b := NewBroker(Options{})
		for i := 1; i <= 5; i++ {
			b.PublishKeyed("t", "k"+strconv.Itoa(i), Event{ID: strconv.Itoa(i), Name: "e", Data: []byte("{}")})
		}
		sub := b.Subscribe("t")
		sub.SkipThrough(3)
		var got []string
		if byChannel {
			ch := sub.Events()
			b.PublishKeyed("t", "k1", Event{ID: "6", Name: "e", Data: []byte("{}")})
			for len(got) < 3 {
				select {
				case e := <-ch:
					got = append(got, e.ID)
				case <-time.After(10 * time.Second):
					t.Fatalf("by channel: got %v only", got)
				}
			}
		} else {
			b.PublishKeyed("t", "k1", Event{ID: "6", Name: "e", Data: []byte("{}")})
			for _, e := range sub.take(nil) {
				got = append(got, e.ID)
			}
		}
		if len(got) != 3 || got[0] != "4" || got[1] != "5" || got[2] != "6" {
			t.Fatalf("by channel %v: got %v, want [4 5 6]", byChannel, got)
		}
		sub.Close()
		b.Close()
	}
}
