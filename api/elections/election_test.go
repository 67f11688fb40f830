package elections_test

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Three candidates on two sidecars: each way a leader can go hands leadership to
// the next candidate, and subscribers on both sidecars see it with a higher term.
func TestLeadershipHandoff(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	bin := sidecartest.BuildBinary(t)

	type leaderSide struct {
		car   *sidecartest.Sidecar
		lease string
		proc  *exec.Cmd
	}
	cases := []struct {
		name    string
		process bool // the first candidate runs on a sidecar process of its own
		query   string
		hand    func(t *testing.T, l leaderSide, election string)
		bound   time.Duration // the handoff must happen within this
	}{
		{name: "resign", query: "ttl=60s", bound: 5 * time.Second, hand: func(t *testing.T, l leaderSide, election string) {
			l.car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/"+election+"/candidates/c1?lease="+l.lease)
		}},
		{name: "lease-revoked", query: "ttl=60s", bound: 5 * time.Second, hand: func(t *testing.T, l leaderSide, election string) {
			l.car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+l.lease)
		}},
		{name: "lease-stream-closed", query: "ttl=60s", bound: 5 * time.Second, hand: func(t *testing.T, l leaderSide, election string) {
			st := l.car.OpenStream(t, "/v1/leases/"+l.lease+"/events")
			st.Next(t, 5*time.Second)
			st.Cancel()
		}},
		{name: "lease-ttl-lapsed", query: "ttl=1s", bound: 5 * time.Second, hand: func(t *testing.T, l leaderSide, election string) {}},
		{name: "sidecar-SIGTERM", process: true, query: "ttl=60s", bound: 10 * time.Second, hand: func(t *testing.T, l leaderSide, election string) {
			if err := l.proc.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
		// The killed sidecar's session expires on the server after its timeout (1s),
		// in buckets of one tick (200ms); allow 500ms for the news to travel.
		{name: "sidecar-SIGKILL", process: true, query: "ttl=60s", bound: time.Second + 200*time.Millisecond + 500*time.Millisecond, hand: func(t *testing.T, l leaderSide, election string) {
			if err := l.proc.Process.Kill(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			election := "handoff-" + c.name
			first := leaderSide{car: a}
			if c.process {
				addr := sidecartest.FreeAddr(t)
				cmd := exec.Command(bin, "--listen", addr, "--zk", zkc.Server(0), "--zk-root", root, "--session-timeout", "1s")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				go func() { _ = cmd.Wait() }()
				t.Cleanup(func() { _ = cmd.Process.Kill() })
				first = leaderSide{car: &sidecartest.Sidecar{Base: "http://" + addr}, proc: cmd}
				first.car.WaitReady(t)
			}
			subs := []*sidecartest.LeaderFollower{
				{St: a.OpenStream(t, "/v1/elections/"+election+"/events")},
				{St: b.OpenStream(t, "/v1/elections/"+election+"/events")},
			}
			g := sidecartest.Campaign(t, first.car, election, "c1", c.query)
			first.lease = sidecartest.Str(g.Body["lease"])
			if g.Body["leader"] != true {
				t.Fatalf("c1 does not lead: %s", g.Raw)
			}
			sidecartest.Campaign(t, a, election, "c2", "ttl=60s")
			sidecartest.Campaign(t, b, election, "c3", "ttl=60s")
			var term int64
			for _, s := range subs {
				term = s.Await(t, "c1", 0, 10*time.Second)
			}
			testutil.Eventually(t, 10*time.Second, "three candidates in line", func() bool {
				r := a.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/"+election)
				return len(r.Body["candidates"].([]any)) == 3
			})

			start := time.Now()
			c.hand(t, first, election)
			for _, s := range subs {
				if got := s.Await(t, "c2", term, c.bound+5*time.Second); got <= term {
					t.Fatalf("new term %d not above %d", got, term)
				}
			}
			took := time.Since(start)
			if c.name != "lease-ttl-lapsed" && took > c.bound {
				t.Fatalf("handoff took %s, bound %s", took, c.bound)
			}
			t.Logf("handoff by %s in %s", c.name, took.Round(time.Millisecond))
			// Exactly one leader: c2, and c3 still waits behind it.
			r := b.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/"+election)
			cands := r.Body["candidates"].([]any)
			if leader := r.Body["leader"].(map[string]any); sidecartest.Str(leader["candidate"]) != "c2" || len(cands) != 2 {
				t.Fatalf("after the handoff: %s", r.Raw)
			}
		})
	}
}

// requeue rotates leadership through every candidate in order.
func TestRequeueRotatesLeadership(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	leases := map[string]string{}
	cars := map[string]*sidecartest.Sidecar{"c1": a, "c2": b, "c3": a}
	for _, id := range []string{"c1", "c2", "c3"} {
		leases[id] = sidecartest.Str(sidecartest.Campaign(t, cars[id], "turns", id, "ttl=60s").Body["lease"])
	}
	sub := &sidecartest.LeaderFollower{St: b.OpenStream(t, "/v1/elections/turns/events")}
	var term int64
	order := []string{"c1", "c2", "c3", "c1", "c2", "c3", "c1"}
	for i, id := range order {
		term = sub.Await(t, id, term, 10*time.Second)
		if i == len(order)-1 {
			break
		}
		r := cars[id].Must(t, http.StatusCreated, http.MethodDelete, "/v1/elections/turns/candidates/"+id+"?lease="+leases[id]+"&requeue=true")
		if r.Body["leader"] != false {
			t.Fatalf("requeued %s still sidecartest.Leads: %s", id, r.Raw)
		}
	}
}

// A subscriber that reconnects with Last-Event-ID first gets the current state;
// a long-poll on term answers when the term changes.
func TestReconnectGetsCurrentStateAndLongPoll(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	g := sidecartest.Campaign(t, car, "lp", "c1", "ttl=60s")
	term := sidecartest.Num(g.Body["term"])

	st := car.OpenStream(t, "/v1/elections/lp/events", "Last-Event-ID", "1")
	first := st.Next(t, 5*time.Second)
	if leader := first.Data["leader"].(map[string]any); first.Name != "leader" || sidecartest.Num(leader["term"]) != term {
		t.Fatalf("first event after reconnect: %+v", first)
	}

	polled := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodGet, fmt.Sprintf("/v1/elections/lp?term=%d&wait=30s", term), nil)
		polled <- r
	}()
	sidecartest.Campaign(t, car, "lp", "c2", "ttl=60s")
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/lp/candidates/c1?lease="+sidecartest.Str(g.Body["lease"]))
	select {
	case r := <-polled:
		leader := r.Body["leader"].(map[string]any)
		if sidecartest.Str(leader["candidate"]) != "c2" || sidecartest.Num(leader["term"]) <= term {
			t.Fatalf("long-poll answer %s", r.Raw)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not answer on the change of leader")
	}
	// Unchanged within wait: 200 with the same term.
	r := car.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/lp?term=0&wait=1s")
	if r.Body["leader"] == nil {
		t.Fatalf("long-poll with an old term: %s", r.Raw)
	}
}

// 1,000 subscribers on one election cost one ZooKeeper watcher: the watches the
// server holds for the election are the same for 1 subscriber and for 1,000.
func TestThousandSubscribersOneWatch(t *testing.T) {
	zkc := zktest.Shared(t)
	if len(zkc.Servers()) != 1 {
		t.Skip("counts watches on one server")
	}
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	sidecartest.Campaign(t, car, "crowd", "c1", "ttl=60s")
	sidecartest.Campaign(t, car, "crowd", "c2", "ttl=60s")

	first := car.OpenStream(t, "/v1/elections/crowd/events")
	first.Next(t, 5*time.Second)
	one := zktest.WatchedPaths(t, zkc.Server(0), root+"/elections/crowd")

	streams := make([]*sidecartest.Stream, 0, 999)
	for range 999 {
		streams = append(streams, car.OpenStream(t, "/v1/elections/crowd/events"))
	}
	for _, s := range streams {
		if ev := s.Next(t, 10*time.Second); ev.Name != "leader" {
			t.Fatalf("first event %+v", ev)
		}
	}
	thousand := zktest.WatchedPaths(t, zkc.Server(0), root+"/elections/crowd")
	if thousand != one {
		t.Fatalf("watched paths: %d with 1 subscriber, %d with 1000", one, thousand)
	}
	m := car.Must(t, http.StatusOK, http.MethodGet, "/metrics")
	if !strings.Contains(string(m.Raw), "coord_election_watched 1\n") {
		t.Fatal("coord_election_watched is not 1 with 1000 subscribers on one election")
	}
	// A change reaches all of them.
	sidecartest.Campaign(t, car, "crowd", "c3", "ttl=60s")
	for _, s := range append(streams, first) {
		ev := s.Next(t, 10*time.Second)
		if len(ev.Data["candidates"].([]any)) != 3 {
			t.Fatalf("event after the third candidate: %+v", ev)
		}
	}
	t.Logf("%d watched paths under the election for 1 and for 1000 subscribers", one)
}
