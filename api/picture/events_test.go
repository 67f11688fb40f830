package picture_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// GET /v1/events with thousands of things: the first state arrives whole,
// without the stream being dropped, and changes (a new lock, a new leader, a
// barrier lowered) show within a second.
func TestEverythingStreamWithThousands(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	conn := zktest.Connect(t, zkc.Servers(), 10*time.Second)
	n := sidecartest.Things{Locks: 1800, Elections: 600, Queues: 300, Barriers: 300}
	made := sidecartest.MakeThings(t, conn, root, n)
	car := sidecartest.Start(t, zkc.Servers(), root)

	st := car.OpenStream(t, "/v1/events")
	took := sidecartest.FirstState(t, st, n.Total(), 60*time.Second)
	t.Logf("%d things made in %v; the first state complete after %v", n.Total(), made, took)

	var shown []time.Duration
	for i := range 3 {
		lock := fmt.Sprint("fresh-", i)
		shown = append(shown, sidecartest.Timed(func() {
			car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/"+lock+"?ttl=60s&owner=me")
		}, func() {
			sidecartest.AwaitEvent(t, st, 5*time.Second, "lock "+lock+" held", func(ev sidecartest.Event) bool {
				return ev.Name == "lock" && ev.Data["name"] == lock && ev.Data["holder"] != nil
			})
		}))
	}
	election := sidecartest.ThingName("election", 3)
	if _, err := conn.Create(root+"/elections/"+election+"/_c_"+fmt.Sprintf("%032x", 0)+"-latch-", []byte(`{"candidate":"second"}`), zk.FlagEphemeral|zk.FlagSequence, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sidecartest.AwaitEvent(t, st, 5*time.Second, "a second candidate", func(ev sidecartest.Event) bool {
		c, _ := ev.Data["candidates"].([]any)
		return ev.Name == "leader" && ev.Data["name"] == election && len(c) == 2
	})
	barrier := sidecartest.ThingName("barrier", 5)
	shown = append(shown, sidecartest.Timed(func() {
		car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/barriers/"+barrier)
	}, func() {
		sidecartest.AwaitEvent(t, st, 5*time.Second, "barrier lowered", func(ev sidecartest.Event) bool {
			return ev.Name == "barrier" && ev.Data["name"] == barrier && ev.Data["deleted"] == true
		})
	}))
	browsertest.LogLatency(t, "change shown on /v1/events", shown)
}

// With nothing changing, the sidecar sends ZooKeeper nothing but its pings for
// the whole picture, whether one or ten clients follow it: counted on the
// server's side, on the sidecar's own connection (`cons`).
func TestEverythingStreamReadsNothingWhileIdle(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	conn := zktest.Connect(t, zkc.Servers(), 10*time.Second)
	n := sidecartest.Things{Locks: 300, Elections: 100, Queues: 50, Barriers: 50}
	sidecartest.MakeThings(t, conn, root, n)
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
	sidecartest.FirstState(t, first, n.Total(), 30*time.Second)
	one := idle("1 follower")
	for range 9 {
		sidecartest.FirstState(t, car.OpenStream(t, "/v1/events"), n.Total(), 30*time.Second)
	}
	ten := idle("10 followers")
	// The old picture read 500 things 4 times a second (thousands of requests);
	// now the picture adds nothing to the session's heartbeat while idle.
	for _, r := range []float64{one, ten} {
		if r > none+1 {
			t.Errorf("%.1f requests/s while idle with %d things, %.1f/s with no follower: the picture reads while idle", r, n.Total(), none)
		}
	}
}
