package zktest

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// Witness is a session that can die as a killed process's session does: its
// wire is cut and never comes back, so the servers expire it once its timeout
// has passed since they last heard from it. A test that must know that a
// session of the same timeout, silent since no later than the witness died,
// would have expired by now (had nobody resumed it) waits for the witness's
// expiry instead of sleeping for a guessed bound: the servers' own clock
// decides, on a quiet machine or a busy one.
type Witness struct {
	conn     *zk.Conn
	observer *zk.Conn
	node     string

	mu   sync.Mutex
	dead bool
	wire net.Conn // the connection open now, nil when none
}

// errDead is every dial of a dead witness.
var errDead = errors.New("zktest: the witness is dead")

// StartWitness opens a session with sessionTimeout on servers and marks it
// with an ephemeral node, which a second connection watches. Both are closed
// in tb.Cleanup.
func StartWitness(tb testing.TB, servers []string, sessionTimeout time.Duration) *Witness {
	tb.Helper()
	w := &Witness{observer: Connect(tb, servers, 30*time.Second), node: Root(tb) + "-witness"}
	ev := &Events{notify: make(chan struct{})}
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.dead {
			return nil, errDead
		}
		c, err := net.DialTimeout(network, address, timeout)
		if err == nil {
			w.wire = c
		}
		return c, err
	}
	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithEventCallback(ev.record), zk.WithDialer(dial))
	if err != nil {
		tb.Fatalf("zktest: witness: connect %v: %v", servers, err)
	}
	w.conn = conn
	tb.Cleanup(conn.Close)
	ev.Wait(tb, zk.StateHasSession, 30*time.Second)
	if _, err := conn.Create(w.node, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		tb.Fatalf("zktest: witness: create %s: %v", w.node, err)
	}
	return w
}

// Die makes one round trip on the witness's session and then cuts its wire
// for good, as SIGKILL does a process's: the servers last heard from it after
// Die was called, and never hear from it again. A session that went silent
// before the call (a process killed first) has therefore expired once the
// witness has.
func (w *Witness) Die(tb testing.TB) {
	tb.Helper()
	if _, _, err := w.conn.Exists(w.node); err != nil {
		tb.Fatalf("zktest: witness: exists %s: %v", w.node, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.dead = true
	if w.wire != nil {
		_ = w.wire.Close()
		w.wire = nil
	}
}

// AwaitExpired waits until the servers have expired the witness's session
// (its node is gone), failing tb if that takes longer than within. Call Die
// first.
func (w *Witness) AwaitExpired(tb testing.TB, within time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, _, err := w.observer.Exists(w.node)
		if err != nil {
			tb.Fatalf("zktest: witness: exists %s: %v", w.node, err)
		}
		if !ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("zktest: the witness's session did not expire within %s", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
