package sidecar

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// One session, one process (docs/SECURITY.md, "The state directory is a secret"). With
// --state-dir, whoever holds the state file's session id and password can
// take the session; a copy of the file started as a second process (another
// state directory, maybe on another host) would make the two take the session
// from each other at every reconnect, for ever. So the sidecar records its
// incarnation in a node of its session, <root>/sessions/0x<session id>
// (zookeeper.Incarnation: written before the sidecar serves, checked at every
// reconnect before the session counts as connected). The process whose
// reconnect finds another's record has lost the session to it: it stops
// serving, leaves the session and its nodes alone (detached, not closed),
// clears its state file (so that a restart makes a new session rather than
// taking this one back), and exits ExitTakenOver, naming its state directory
// and the other process.

// ExitTakenOver is the exit status of a sidecar whose session another process
// took over.
const ExitTakenOver = 3

// sessionsDir is the container, under --zk-root, of the sessions' records.
const sessionsDir = "sessions"

// ownerRecord is what a sidecar records in its session's node.
type ownerRecord struct {
	// Incarnation is random, drawn at the process's start: two processes
	// never share one, whatever else they share (a host, a pid, a path).
	Incarnation string `json:"incarnation"`
	Host        string `json:"host"`
	PID         int    `json:"pid"`
	StateDir    string `json:"stateDir"`
}

// owner is the sidecar's side of the records: its own, and the take-over,
// once it happened.
type owner struct {
	record ownerRecord
	// taken receives the take-over's error, once.
	taken chan error
}

// incarnation is the zookeeper.Config.Incarnation of the sidecar: nil
// without --state-dir (nobody else can present the session then).
func (m *Main) incarnation() *zookeeper.Incarnation {
	if m.restarts == nil {
		return nil
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	host, _ := os.Hostname()
	o := &owner{taken: make(chan error, 1), record: ownerRecord{Incarnation: hex.EncodeToString(b[:]), Host: host,
		PID: os.Getpid(), StateDir: m.restarts.dir.Path()}}
	data, err := json.Marshal(o.record)
	if err != nil {
		panic(err) // strings and an int
	}
	m.owner = o
	return &zookeeper.Incarnation{Dir: path.Join(m.Config.ZKRoot, sessionsDir), Record: data, TakenOver: m.takenOver}
}

// takenOver is zookeeper.Incarnation.TakenOver: it logs the line that says
// what happened and tells main (TakenOver), which stops the sidecar
// (Abandon). The connection is already cut and the Session detaches itself.
func (m *Main) takenOver(id int64, found []byte) {
	var other ownerRecord
	_ = json.Unmarshal(found, &other) // a record of another making is named as it is
	mine := m.owner.record
	err := fmt.Errorf("state directory %s: the ZooKeeper session 0x%x was taken over by another process (pid %d on host %q, state directory %s); this process stopped serving and exits, its state file cleared",
		mine.StateDir, id, other.PID, other.Host, other.StateDir)
	m.log.Error("zookeeper session taken over by another process presenting its id and password (a copy of the state file?): stopping, the session and what it holds left to the other process",
		"stateDir", mine.StateDir, "session", fmt.Sprintf("0x%x", id), "otherHost", other.Host, "otherPid", other.PID,
		"otherStateDir", other.StateDir, "otherIncarnation", other.Incarnation, "record", string(found))
	select {
	case m.owner.taken <- err:
	default:
	}
}

// TakenOver delivers the error that says another process took the session
// over; main then calls Abandon and exits ExitTakenOver. Without --state-dir
// it never delivers.
func (m *Main) TakenOver() <-chan error {
	if m.owner == nil {
		return nil
	}
	return m.owner.taken
}

// Abandon stops the sidecar after its session was taken over: the session
// detached first (nothing more reaches ZooKeeper: the session and its nodes
// are the other process's), the state file cleared and the directory let go,
// then the HTTP side as at a shutdown; the leases end as lost. After Close or
// a hand-over it does nothing.
func (m *Main) Abandon() {
	m.closeOnce.Do(func() {
		defer m.logOut.Close()
		m.restarts.abandon(m.session)
		m.closeErr = m.stopHTTP(m.server.Close)
		m.leases.Wait()
		m.server.CloseRecipes()
		m.log.Info("stopped: the session belongs to the other process")
	})
}

// abandon lets go of the state directory after the session was taken over:
// nothing more is written (the state names a session that is no longer this
// process's), the session is detached, and the state file is removed so that
// the process started next on the directory makes a new session instead of
// taking this one back.
func (r *restarts) abandon(sess *zookeeper.Session) {
	if r.unsubscribe != nil {
		r.unsubscribe()
	}
	if j := r.journal.Load(); j != nil {
		j.Close()
	}
	sess.Detach()
	r.wg.Wait()
	if err := r.dir.Clear(); err != nil {
		r.log.Error("state directory not cleared", "err", err)
	}
	_ = r.dir.Close()
}

// claimed is restored (the API's gate before /v1 and a ready /readyz),
// closed also only once the sidecar's record is written for its session
// (with --state-dir): a process that serves has claimed its session.
func (m *Main) claimed(sess *zookeeper.Session, restored <-chan struct{}) <-chan struct{} {
	if m.owner == nil {
		return restored
	}
	sess.Dir(sessionsDir) // its ACL is checked with the recipes' parents
	both := make(chan struct{})
	go func() {
		defer close(both)
		if restored != nil {
			<-restored
		}
		_ = sess.WaitClaimed(context.Background()) // ErrClosed at the end: nothing waits any more
	}()
	return both
}
