package sidecar

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/transport"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// syncEvery is how long a written state may stay unsynced (statedir's
// SyncEvery): every change is written before its answer is sent, so a killed
// process's successor reads every one; a crashed machine's may miss this much
// of the latest. Syncing every write cost the lock rows up to 9%
// (docs/BENCHMARKS.md, "Restarts").
const syncEvery = time.Second

// restarts is the sidecar's side of --state-dir (the README's "Restarts"):
// the owned directory, the state a predecessor left in it, the resume at
// start, and the Journal that keeps the state current, durable before every
// answer (Commit). It is made before the ZooKeeper session (which presents
// the saved session) and started after the recipes. Nothing is written to
// the directory until the resume is reconciled: the state on disk is always
// one that some process could resume.
type restarts struct {
	dir     *statedir.Dir
	saved   statedir.State // what the predecessor left (Session.ID 0: nothing)
	zk      string
	root    string
	log     *slog.Logger
	metrics restartMetrics

	journal atomic.Pointer[statedir.Journal] // nil until reconciled
	// unsubscribe ends the journal's subscription to session changes.
	unsubscribe func()
	// failing is set while state writes fail (logged once per episode).
	failing atomic.Bool
	// restored closes once the resume is reconciled (or there was none) and
	// the state is written: the API waits for it before serving /v1, and
	// /readyz answers 200 after it.
	restored chan struct{}
	// fatal gets the error of a resume that came back and could not be
	// reconciled: the process must end without touching the session or the
	// directory, leaving both to its successor.
	fatal chan error
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
		metrics: newRestartMetrics(reg), restored: make(chan struct{}), fatal: make(chan error, 1)}
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

// start begins, in the background, the resume and then the journal:
// Restored closes once the resume is reconciled and the state written.
func (r *restarts) start(sess *zookeeper.Session, leases *kit.Leases) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.reconcile(sess, leases); err != nil {
			r.fatal <- err // restored stays open: nothing is served, nothing written
			return
		}
		r.startJournal(sess, leases)
		close(r.restored)
	}()
}

// startJournal starts the journal on the reconciled state and waits for its
// first write (the whole state). A write that fails is reported by Err (and
// /readyz) and retried; the sidecar serves on, refusing what it cannot keep.
func (r *restarts) startJournal(sess *zookeeper.Session, leases *kit.Leases) {
	src := statedir.Source{
		Session: func() statedir.Session { return savedSession(sess) },
		Lease: func(id string) (statedir.Lease, bool) {
			l, ok := leases.SavedOf(id)
			return stateLease(l), ok
		},
		Hold: func(id, kind, name string) (statedir.Hold, bool) {
			h, ok := leases.SavedHoldOf(id, kit.Hold{Kind: kind, Name: name})
			return statedir.Hold{Kind: h.Kind, Name: h.Name, Nodes: h.Nodes}, ok
		},
		Leases: func() []statedir.Lease {
			all := leases.Snapshot()
			out := make([]statedir.Lease, len(all))
			for i, l := range all {
				out[i] = stateLease(l)
			}
			return out
		},
	}
	j, err := r.dir.Journal(src, r.zk, r.root, statedir.SyncEvery(syncEvery), statedir.OnJournalWrite(r.written))
	if err != nil {
		r.log.Error("state directory: not written from now on", "err", err)
		return
	}
	// Told of every change before its first write (Commit, below): the
	// write reads the whole state after, and nothing falls in between.
	leases.OnChange(func(c kit.Change) {
		if c.Hold.Kind == "" {
			j.Changed(c.Lease)
		} else {
			j.HoldChanged(c.Lease, c.Hold.Kind, c.Hold.Name)
		}
	})
	cancel := sess.Subscribe(func(zookeeper.StateChange) { j.SessionChanged() })
	j.SessionChanged() // the session as it is now, whatever it did before the subscription
	r.journal.Store(j)
	ctx, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	_ = j.Commit(ctx) // a failure is logged by written and answered by Err
	r.unsubscribe = cancel
}

// written counts and logs a failed write once per episode of failures, and
// the recovery.
func (r *restarts) written(err error) {
	if err != nil {
		r.metrics.writeErrors.Inc()
		if !r.failing.Swap(true) {
			r.log.Error("state directory not written: refusing what it would have to keep until a write succeeds", "dir", r.dir.Path(), "err", err)
		}
		return
	}
	if r.failing.Swap(false) {
		r.log.Info("state directory written again", "dir", r.dir.Path())
	}
}

// Commit returns once every change made before it is in the state directory
// (statedir.Journal.Commit); nil before the journal starts (nothing is served
// then).
func (r *restarts) Commit(ctx context.Context) error {
	if j := r.journal.Load(); j != nil {
		return j.Commit(ctx)
	}
	return nil
}

// StateErr is the last state write's error, nil while writes succeed.
func (r *restarts) StateErr() error {
	if j := r.journal.Load(); j != nil {
		return j.Err()
	}
	return nil
}

// savedSession is the session a successor would present now (none until a
// server has answered).
func savedSession(sess *zookeeper.Session) statedir.Session {
	if ep, err := sess.Current(); err == nil {
		if res, ok := ep.Resumable(); ok {
			return statedir.Session{ID: res.ID, Password: res.Password, Timeout: res.Timeout, LastZxid: ep.LastZxid()}
		}
	}
	return statedir.Session{}
}

// stateLease is a lease as the state directory keeps it.
func stateLease(l kit.SavedLease) statedir.Lease {
	sl := statedir.Lease{ID: l.ID, TTL: l.TTL, ExpiresAt: l.ExpiresAt, Owner: l.Owner, Implicit: l.Implicit, Pinned: l.Pinned}
	for _, h := range l.Holds {
		sl.Holds = append(sl.Holds, statedir.Hold{Kind: h.Kind, Name: h.Name, Nodes: h.Nodes})
	}
	return sl
}

// reconcile waits for the resume's outcome; when the session came back, it
// re-creates the saved leases and adopts their holds (kit.Leases.Restore).
// Too late, or nothing to resume: nothing of the predecessor is held, and its
// leases answer 404. A connection that drops meanwhile (the server the
// session came back on dies) is waited out: each step is tried again once
// the session is back on another server, within the same deadline. A session
// that came back and could not be reconciled in time is an error: the
// process must then leave it, and the state, to a successor.
func (r *restarts) reconcile(sess *zookeeper.Session, leases *kit.Leases) error {
	if r.saved.Session.ID == 0 {
		r.outcome = "none"
		return nil
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
		return nil
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
		r.log.Error("restart: the session came back but its leases could not be restored: leaving both to a successor", "session", id, "err", err)
		return fmt.Errorf("restart: session %s resumed but not reconciled (state directory %s left as it was): %w", id, r.dir.Path(), err)
	}
	r.outcome = "resumed"
	r.metrics.restarts.WithLabelValues(r.outcome).Inc()
	r.metrics.leases.Add(float64(got.Leases))
	r.metrics.holds.Add(float64(got.Holds))
	r.metrics.lost.Add(float64(len(got.Lost)))
	r.log.Info("restart: resumed the predecessor's session", "session", id, "leases", got.Leases, "holds", got.Holds,
		"expired", got.Expired, "lost", len(got.Lost), "swept", got.Swept, "took", time.Since(start).String())
	return nil
}

// savedLeases converts the state file's leases for kit.Leases.Restore. A
// lease that was pinned (its client's stream open, a request waiting) gets
// its TTL from now, for its client to come back.
func savedLeases(in []statedir.Lease) []kit.SavedLease {
	out := make([]kit.SavedLease, 0, len(in))
	now := time.Now()
	for _, l := range in {
		sl := kit.SavedLease{ID: l.ID, TTL: l.TTL, ExpiresAt: l.ExpiresAt, Owner: l.Owner, Implicit: l.Implicit, Pinned: l.Pinned}
		if l.Pinned {
			sl.ExpiresAt = now.Add(l.TTL)
		}
		for _, h := range l.Holds {
			sl.Holds = append(sl.Holds, kit.SavedHold{Hold: kit.Hold{Kind: h.Kind, Name: h.Name}, Nodes: h.Nodes})
		}
		out = append(out, sl)
	}
	return out
}

// Restored is closed once the resume is reconciled and the state written.
func (r *restarts) Restored() <-chan struct{} { return r.restored }

// Fatal gets the error that ends the process when a resumed session could
// not be reconciled (see reconcile).
func (r *restarts) Fatal() <-chan error { return r.fatal }

// close ends the journal. ended: the session was closed on purpose (SIGTERM),
// so the state file is cleared and a successor starts afresh; otherwise the
// last state is flushed for the successor.
func (r *restarts) close(ended bool) {
	r.wg.Wait()
	if r.unsubscribe != nil {
		r.unsubscribe()
	}
	if j := r.journal.Load(); j != nil {
		if !ended {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = j.Flush(ctx)
			cancel()
		}
		j.Close()
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
	if r.unsubscribe != nil {
		r.unsubscribe()
	}
	if j := r.journal.Load(); j != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := j.Flush(ctx); err != nil {
			r.log.Error("upgrade: the last state was not written", "err", err)
		}
		cancel()
		j.Close()
	}
	sess.Detach()
	r.dir.LeavePID()
	_ = r.dir.Close()
}

type restartMetrics struct {
	restarts                         *prometheus.CounterVec
	leases, holds, lost, writeErrors prometheus.Counter
}

func newRestartMetrics(reg prometheus.Registerer) restartMetrics {
	f := promauto.With(reg)
	return restartMetrics{
		restarts: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_restarts_total", Help: "Starts on a state directory a predecessor left, by outcome (resumed, too_late, failed, bad_state).",
		}, []string{"outcome"}),
		leases: f.NewCounter(prometheus.CounterOpts{Name: "coord_restart_leases_resumed_total", Help: "Leases re-created from the state directory after a resumed session."}),
		holds:  f.NewCounter(prometheus.CounterOpts{Name: "coord_restart_holds_resumed_total", Help: "Holds adopted from their nodes after a resumed session."}),
		lost:   f.NewCounter(prometheus.CounterOpts{Name: "coord_restart_holds_lost_total", Help: "Saved holds that could not be adopted after a resumed session (reported on their lease's stream)."}),
		writeErrors: f.NewCounter(prometheus.CounterOpts{Name: "coord_state_write_errors_total",
			Help: "Writes to the state directory that failed; while the last one failed, requests that change state answer 503 state-unavailable and /readyz 503."}),
	}
}
