package sse_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// wait bounds every wait in these tests; nothing is ordered by sleeping.
const wait = 10 * time.Second

func TestMain(m *testing.M) {
	base := runtime.NumGoroutine()
	code := m.Run()
	if code == 0 {
		if n, ok := settle(base); !ok {
			fmt.Fprintf(os.Stderr, "goroutine leak: %d running after the tests, %d before\n%s\n", n, base, stacks())
			code = 1
		}
	}
	os.Exit(code)
}

// settle polls until at most base goroutines run, for up to wait.
func settle(base int) (int, bool) {
	deadline := time.Now().Add(wait)
	for {
		n := runtime.NumGoroutine()
		if n <= base {
			return n, true
		}
		if time.Now().After(deadline) {
			return n, false
		}
		runtime.Gosched()
		time.Sleep(5 * time.Millisecond) // polling interval, not ordering
	}
}

func stacks() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// noLeaks fails t if goroutines started during the test outlive it. Call it
// first, so that its cleanup runs after every other.
func noLeaks(t *testing.T) {
	t.Helper()
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		if n, ok := settle(base); !ok {
			t.Errorf("goroutine leak: %d running, %d at start\n%s", n, base, stacks())
		}
	})
}

// ev is event number id of topic: Name carries the topic.
func ev(topic string, id int) sse.Event {
	return sse.Event{ID: strconv.Itoa(id), Name: topic, Data: []byte(`{"n":` + strconv.Itoa(id) + `}`)}
}

func recv(t *testing.T, ch <-chan sse.Event) sse.Event {
	t.Helper()
	select {
	case e, ok := <-ch:
		if !ok {
			t.Fatal("events channel closed")
		}
		return e
	case <-time.After(wait):
		t.Fatal("timed out waiting for an event")
	}
	return sse.Event{}
}

// noEvent checks that nothing is waiting on ch. Delivery is synchronous in
// Publish and Subscribe, so no wait is needed.
func noEvent(t *testing.T, ch <-chan sse.Event) {
	t.Helper()
	select {
	case e, ok := <-ch:
		if ok {
			t.Fatalf("unexpected event %+v", e)
		}
		t.Fatal("events channel closed")
	default:
	}
}

func waitDone(t *testing.T, sub *sse.Subscription) {
	t.Helper()
	select {
	case <-sub.Done():
	case <-time.After(wait):
		t.Fatal("subscription did not end")
	}
}

func sameEvent(a, b sse.Event) bool {
	return a.ID == b.ID && a.Name == b.Name && string(a.Data) == string(b.Data)
}
