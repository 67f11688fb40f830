package zookeeper

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The session moves to another server of a 3-node ensemble when the server it
// is connected to stops (SIGTERM: the server closes its clients' connections;
// SIGKILL: the kernel does), and when the leader dies (every follower drops
// its clients until the ensemble has elected a new leader): each time the same
// session comes back ("reconnected"). How long the session was away is logged
// for each stop (COORD_RECONNECT_ROUNDS rounds, default 1): the figures of
// docs/BENCHMARKS.md's reconnect rows, not asserted.
func TestReconnectAfterServerStops(t *testing.T) {
	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("COORD_RECONNECT_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	zkc := zktest.StartEnsemble(t, 3)
	root := zktest.Root(t)
	for round := range rounds {
		for _, how := range []string{"SIGTERM", "SIGKILL", "leader"} {
			servers := zkc.Servers()
			leader := zkc.Leader()
			if how == "leader" {
				// A session on the followers only: its server stays up while
				// the ensemble elects.
				servers = slices.Delete(servers, leader, leader+1)
			}
			s := newTestSessionTimeout(t, servers, root, 10*time.Second)
			rec := recordStates(s)
			id := s.Info().SessionID
			i := slices.Index(zkc.Servers(), s.Info().Server)
			if i < 0 {
				t.Fatalf("connected to %q, not a server of the ensemble", s.Info().Server)
			}
			victim, label := i, fmt.Sprintf("%s of its server (the %s)", how, zkc.Mode(i))
			t0 := time.Now()
			switch how {
			case "SIGTERM":
				zkc.Stop(victim)
			case "SIGKILL":
				zkc.Kill(victim)
			default:
				victim, label = leader, fmt.Sprintf("SIGKILL of the leader (its server a %s)", zkc.Mode(i))
				zkc.Kill(victim)
			}
			suspended, reconnected := rec.back(t, t0, id)
			t.Logf("round %d: %s: suspended after %s, back after %s", round, label,
				suspended.Sub(t0).Round(time.Millisecond), reconnected.Sub(t0).Round(time.Millisecond))
			s.Close()
			zkc.Restart(victim)
			for zkc.Leader() < 0 {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// states records a Session's state changes.
type states struct {
	mu     sync.Mutex
	events []StateChange
}

func recordStates(s *Session) *states {
	r := &states{}
	s.Subscribe(func(ch StateChange) {
		r.mu.Lock()
		r.events = append(r.events, ch)
		r.mu.Unlock()
	})
	return r
}

// back waits for session id to be reconnected after t0 and returns when it was
// suspended and when it was back.
func (r *states) back(t *testing.T, t0 time.Time, id int64) (suspended, reconnected time.Time) {
	t.Helper()
	deadline := time.Now().Add(testutil.Patience(time.Minute))
	for time.Now().Before(deadline) {
		r.mu.Lock()
		for _, ev := range r.events {
			switch {
			case ev.At.Before(t0):
			case ev.Event == "suspended" && suspended.IsZero():
				suspended = ev.At
			case ev.Event == "lost" || ev.Event == "connected":
				r.mu.Unlock()
				t.Fatalf("the session was %s, not reconnected (%v)", ev.Event, ev)
			case ev.Event == "reconnected" && ev.SessionID == id:
				r.mu.Unlock()
				return suspended, ev.At
			}
		}
		r.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the session never came back")
	return
}

// A server that accepts connections but never answers the session handshake
// (a hung JVM; here a blackholed proxy) holds a connecting client for a third
// of the session timeout, not go-zookeeper's ten times two thirds of it (40 s
// here): whichever server go-zookeeper tries first, the session connects
// through the other well within that.
func TestSilentServerIsLeftAfterHandshakeLimit(t *testing.T) {
	zkc := zktest.Shared(t)
	silent := faultproxy.Start(t, zkc.Server(0))
	silent.Blackhole()
	for range 3 { // go-zookeeper shuffles the servers: try its order a few times
		start := time.Now()
		s := newTestSessionTimeout(t, []string{silent.Addr(), zkc.Server(0)}, zktest.Root(t), 6*time.Second)
		if waited := time.Since(start); waited > 20*time.Second {
			t.Fatalf("connected after %s: the silent server held the handshake", waited)
		}
		s.Close()
	}
}
