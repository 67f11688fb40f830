package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/transport"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// saveEvery is the longest a change waits to be written to the state
// directory: what a crash can lose is at most this much of the latest changes
// (see statedir.Saver and docs/ARCHITECTURE.md, "Restarts").
const saveEvery = 20 * time.Millisecond

// syncEvery is how long a written state may stay unsynced (statedir's
// DurableEvery): a killed process's successor reads every write, a crashed
// machine's may miss this much of the latest. Syncing every write cost the
// lock rows up to 9% (docs/BENCHMARKS.md, "Restarts").
const syncEvery = time.Second

// restarts is the sidecar's side of --state-dir (API.md "Restarts"): the
// owned directory, the state a predecessor left in it, the Saver that keeps it
// current, and the resume at start. It is made before the ZooKeeper session
// (which presents the saved session) and started after the recipes.
type restarts struct {
	dir     *statedir.Dir
	saved   statedir.State // what the predecessor left (Session.ID 0: nothing)
	zk      string
	root    string
	log     *slog.Logger
	metrics restartMetrics

	saver *statedir.Saver
	// restored closes once the resume is reconciled (or there was none): the
	// API waits for it before serving /v1 and /readyz answers 200 after it.
	restored chan struct{}
	// outcome says what the resume came to, once restored is closed.
	outcome string
	wg      sync.WaitGroup
}

// openRestarts takes the state directory (an error naming the owner when
// another process has it: never two processes on one session) and reads what
// the predecessor left. A bad state file is logged and moved aside: the
// sidecar then starts a new session and holds nothing.
func openRestarts(c Config, upgrading bool, log *slog.Logger, reg prometheus.Registerer) (*restarts, error) {
	d, err := openStateDir(c.StateDir, upgrading, statedir.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	r := &restarts{dir: d, zk: strings.Join(c.ZK, ","), root: c.ZKRoot, log: log,
		metrics: newRestartMetrics(reg), restored: make(chan struct{})}
	st, err := d.Load(r.zk, r.root)
	var bad *statedir.BadStateError
	switch {
	case err == nil:
		r.saved = st
	case errors.Is(err, statedir.ErrNoState):
	case errors.As(err, &bad):
		log.Warn("state file not used: starting a new ZooKeeper session, holding nothing", "err", err)
		r.metrics.restarts.WithLabelValues("bad_state").Inc()
	default:
		_ = d.Close()
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	if err := d.WritePID(os.Getpid()); err != nil {
		_ = d.Close()
		return nil, fmt.Errorf("--state-dir: %w", err)
	}
	return r, nil
}

// resume is the session the predecessor left, for zookeeper.Config.Resume;
// nil when there is none.
func (r *restarts) resume() *transport.Resumable {
	s := r.saved.Session
	if s.ID == 0 {
		return nil
	}
	return &transport.Resumable{ID: s.ID, Password: s.Password, Timeout: s.Timeout}
}

// start begins saving (every change of the leases marks the state) and, in
// the background, the resume: Restored closes when it is reconciled.
func (r *restarts) start(sess *zookeeper.Session, leases *kit.Leases) error {
	snapshot := func() statedir.State { return r.snapshot(sess, leases) }
	saver, err := r.dir.Saver(snapshot, saveEvery, statedir.DurableEvery(syncEvery), statedir.OnWrite(func(_ statedir.State, err error) {
		if err != nil {
			r.log.Error("state directory not written", "err", err)
		}
	}))
	if err != nil {
		return err
	}
	r.saver = saver
	leases.OnChange(saver.MarkDirty)
	cancel := sess.Subscribe(func(zookeeper.StateChange) { saver.MarkDirty() })
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		r.reconcile(sess, leases)
	}()
	return nil
}

// snapshot is the state a successor needs now: the session's id, password and
// timeout (none until the server has answered) and every lease.
func (r *restarts) snapshot(sess *zookeeper.Session, leases *kit.Leases) statedir.State {
	st := statedir.State{ZK: r.zk, Root: r.root}
	if ep, err := sess.Current(); err == nil {
		if res, ok := ep.Resumable(); ok {
			st.Session = statedir.Session{ID: res.ID, Password: res.Password, Timeout: res.Timeout, LastZxid: ep.LastZxid()}
		}
	}
	for _, l := range leases.Snapshot() {
		sl := statedir.Lease{ID: l.ID, TTL: l.TTL, ExpiresAt: l.ExpiresAt, Owner: l.Owner, Implicit: l.Implicit}
		for _, h := range l.Holds {
			sl.Holds = append(sl.Holds, statedir.Hold{Kind: h.Kind, Name: h.Name, Nodes: h.Nodes})
		}
		st.Leases = append(st.Leases, sl)
	}
	return st
}

// reconcile waits for the resume's outcome; when the session came back, it
// re-creates the saved leases and adopts their holds (kit.Leases.Restore).
// Too late, or nothing to resume: nothing of the predecessor is held, and its
// leases answer 404. A connection that drops meanwhile (the server the
// session came back on dies) is waited out: each step is tried again once
// the session is back on another server, within the same deadline. Restored
// closes at the end, whatever the outcome.
func (r *restarts) reconcile(sess *zookeeper.Session, leases *kit.Leases) {
	defer close(r.restored)
	if r.saved.Session.ID == 0 {
		r.outcome = "none"
		return
	}
	id := fmt.Sprintf("0x%x", r.saved.Session.ID)
	wait := max(r.saved.Session.Timeout, time.Second) * 2
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	start := time.Now()
	err := sess.WaitResume(ctx)
	if err != nil {
		r.outcome = "too_late"
		r.metrics.restarts.WithLabelValues(r.outcome).Inc()
		r.log.Warn("restart: the predecessor's session did not come back; its leases and holds are gone", "session", id, "leases", len(r.saved.Leases), "err", err)
		return
	}
	ep, err := sess.WaitCurrent(ctx)
	if err == nil {
		err = ep.Retry(ctx, func() error { return ep.Sync(ctx, r.root) })
	}
	var got kit.Restored
	if err == nil {
		got, err = leases.Restore(ctx, ep, savedLeases(r.saved.Leases))
	}
	if err != nil {
		r.outcome = "failed"
		r.metrics.restarts.WithLabelValues(r.outcome).Inc()
		r.log.Error("restart: the session came back but its leases could not be restored", "session", id, "err", err)
		return
	}
	r.outcome = "resumed"
	r.metrics.restarts.WithLabelValues(r.outcome).Inc()
	r.metrics.leases.Add(float64(got.Leases))
	r.metrics.holds.Add(float64(got.Holds))
	r.metrics.lost.Add(float64(len(got.Lost)))
	r.log.Info("restart: resumed the predecessor's session", "session", id, "leases", got.Leases, "holds", got.Holds,
		"expired", got.Expired, "lost", len(got.Lost), "swept", got.Swept, "took", time.Since(start).String())
}

// savedLeases converts the state file's leases for kit.Leases.Restore.
func savedLeases(in []statedir.Lease) []kit.SavedLease {
	out := make([]kit.SavedLease, 0, len(in))
	for _, l := range in {
		sl := kit.SavedLease{ID: l.ID, TTL: l.TTL, ExpiresAt: l.ExpiresAt, Owner: l.Owner, Implicit: l.Implicit}
		for _, h := range l.Holds {
			sl.Holds = append(sl.Holds, kit.SavedHold{Hold: kit.Hold{Kind: h.Kind, Name: h.Name}, Nodes: h.Nodes})
		}
		out = append(out, sl)
	}
	return out
}

// Restored is closed once the resume is reconciled.
func (r *restarts) Restored() <-chan struct{} { return r.restored }

// close ends the saving. ended: the session was closed on purpose (SIGTERM),
// so the state file is cleared and a successor starts afresh; otherwise the
// last state is written for the successor.
func (r *restarts) close(ended bool) {
	r.wg.Wait()
	if r.saver != nil {
		if !ended {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = r.saver.Flush(ctx)
			cancel()
		}
		r.saver.Close()
	}
	if ended {
		if err := r.dir.Clear(); err != nil {
			r.log.Error("state directory not cleared", "err", err)
		}
	}
	_ = r.dir.Close()
}

// handOver ends this process's part for an upgrade's successor: the last
// state written, the session detached (not closed: its ephemeral nodes live on
// for the successor), the directory let go (the successor's signal to load
// it) with the pid file still naming this process until the successor writes
// its own. The leases of the detached session then end here as lost without
// touching ZooKeeper, and nothing more is written.
func (r *restarts) handOver(sess *zookeeper.Session) {
	r.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := r.saver.Flush(ctx); err != nil {
		r.log.Error("upgrade: the last state was not written", "err", err)
	}
	cancel()
	r.saver.Close()
	sess.Detach()
	r.dir.LeavePID()
	_ = r.dir.Close()
}

type restartMetrics struct {
	restarts            *prometheus.CounterVec
	leases, holds, lost prometheus.Counter
}

func newRestartMetrics(reg prometheus.Registerer) restartMetrics {
	m := restartMetrics{
		restarts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_restarts_total", Help: "Starts on a state directory a predecessor left, by outcome (resumed, too_late, failed, bad_state).",
		}, []string{"outcome"}),
		leases: prometheus.NewCounter(prometheus.CounterOpts{Name: "coord_restart_leases_resumed_total", Help: "Leases re-created from the state directory after a resumed session."}),
		holds:  prometheus.NewCounter(prometheus.CounterOpts{Name: "coord_restart_holds_resumed_total", Help: "Holds adopted from their nodes after a resumed session."}),
		lost:   prometheus.NewCounter(prometheus.CounterOpts{Name: "coord_restart_holds_lost_total", Help: "Saved holds that could not be adopted after a resumed session (reported on their lease's stream)."}),
	}
	if reg != nil {
		reg.MustRegister(m.restarts, m.leases, m.holds, m.lost)
	}
	return m
}
