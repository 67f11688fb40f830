package sidecartest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

type TimedEvent struct {
	Event
	At time.Time
}

// EventLog records every event of one SSE stream, in order, with its arrival time.
type EventLog struct {
	Path string
	done chan struct{} // closed when the reader has returned

	Mu     sync.Mutex
	evs    []TimedEvent
	next   int           // first event awaitEvent has not consumed
	notify chan struct{} // closed and replaced on every event and at the end
	Ended  bool
	Err    error // how the stream ended (io.EOF: cleanly)
}

// FollowEvents opens an SSE stream on car and logs its events. The stream
// belongs to t: it is closed, and its reader has returned, by the end of t.
func FollowEvents(t testing.TB, car *Sidecar, path string) *EventLog {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, car.Base+path, nil)
	resp, err := FaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: status %d", path, resp.StatusCode)
	}
	l := &EventLog{Path: path, notify: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		defer resp.Body.Close()
		err := ReadEvents(resp.Body, func(ev Event) bool {
			l.Add(TimedEvent{ev, time.Now()})
			return true
		})
		l.End(err)
	}()
	t.Cleanup(func() {
		cancel()
		<-l.done
	})
	return l
}

// CutOffPair starts a sidecar behind a fault proxy to ZooKeeper (with the given
// session timeout) and another one straight on ZooKeeper, both under one root.
func CutOffPair(t *testing.T, zkc *zktest.Cluster, sessionTimeout string) (*faultproxy.Proxy, *Sidecar, *Sidecar) {
	t.Helper()
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	cut := Start(t, []string{proxy.Addr()}, root, "--session-timeout", sessionTimeout)
	return proxy, cut, Start(t, zkc.Servers(), root)
}

func (l *EventLog) Add(ev TimedEvent) {
	l.Mu.Lock()
	l.evs = append(l.evs, ev)
	close(l.notify)
	l.notify = make(chan struct{})
	l.Mu.Unlock()
}

func (l *EventLog) End(err error) {
	l.Mu.Lock()
	l.Ended, l.Err = true, err
	close(l.notify)
	l.notify = make(chan struct{})
	l.Mu.Unlock()
}

// Events returns a copy of every event logged so far.
func (l *EventLog) Events() []TimedEvent {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return append([]TimedEvent(nil), l.evs...)
}

// AwaitEvent consumes events up to and including the first for which match
// holds, and returns it; it fails the test if none comes within the time given
// (made testutil.Patience).
func (l *EventLog) AwaitEvent(t testing.TB, within time.Duration, what string, match func(TimedEvent) bool) TimedEvent {
	t.Helper()
	within = testutil.Patience(within)
	timer := time.NewTimer(within)
	defer timer.Stop()
	for {
		l.Mu.Lock()
		for l.next < len(l.evs) {
			ev := l.evs[l.next]
			l.next++
			if match(ev) {
				l.Mu.Unlock()
				return ev
			}
		}
		notify, ended := l.notify, l.Ended
		l.Mu.Unlock()
		if ended {
			t.Fatalf("%s: the stream ended (%v) before %s", l.Path, l.Err, what)
		}
		select {
		case <-notify:
		case <-timer.C:
			t.Fatalf("%s: no %s within %s; events: %v", l.Path, what, within, l.Names())
		}
	}
}

// Pending returns the events not consumed yet.
func (l *EventLog) Pending() []TimedEvent {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	return append([]TimedEvent(nil), l.evs[l.next:]...)
}

func (l *EventLog) Names() []string {
	l.Mu.Lock()
	defer l.Mu.Unlock()
	var out []string
	for _, ev := range l.evs {
		name := ev.Name
		if s := Str(ev.Data["state"]); s != "" {
			name += ":" + s
		}
		out = append(out, name)
	}
	return out
}

// EventLeader reads the leader of an election event (ok false when nobody Leads or
// the sidecar is suspended).
func EventLeader(ev Event) (term int64, candidate string, ok bool) {
	leader, _ := ev.Data["leader"].(map[string]any)
	if ev.Name != "leader" || leader == nil {
		return 0, "", false
	}
	return Num(leader["term"]), Str(leader["candidate"]), true
}

// Leads matches a `leader` event that names candidate as the leader.
func Leads(candidate string) func(TimedEvent) bool {
	return func(ev TimedEvent) bool {
		_, c, ok := EventLeader(ev.Event)
		return ok && c == candidate
	}
}
