package transport

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Resumable is what a successor needs to take over a ZooKeeper session: its id
// and password, and the timeout the server negotiated for it. The password is a
// secret: whoever holds it owns the session and its ephemeral nodes.
type Resumable struct {
	ID       int64
	Password []byte
	// Timeout is the negotiated session timeout: the session outlives its
	// connection's end by about this long. When resuming, the request asks
	// for the configured timeout again.
	Timeout time.Duration
}

// ErrResumeTooLate means the server did not give back the session that was
// presented (it expired, or the password is wrong): the client goes on with a
// new session, and nothing of the old one is owned.
var ErrResumeTooLate = errors.New("too late to resume the ZooKeeper session")

// ErrNoResume is the outcome of a Resume with no session to present.
var ErrNoResume = errors.New("no ZooKeeper session to resume was configured")

// Resume is a client's taking over of a predecessor's session: the
// Handshake of its first go-zookeeper client presents the session until a
// server answers, and the outcome is known once (Done, Err), logged and
// counted.
type Resume struct {
	session  *Resumable
	log      *slog.Logger
	outcomes *prometheus.CounterVec

	once sync.Once
	done chan struct{}
	err  error
}

// NewResume returns the taking over of session; with session nil, its
// outcome is ErrNoResume at once. Its counter of outcomes goes to reg (nil:
// registered nowhere).
func NewResume(session *Resumable, log *slog.Logger, reg prometheus.Registerer) *Resume {
	f := promauto.With(reg)
	r := &Resume{session: session, log: log, done: make(chan struct{}),
		outcomes: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_zk_session_resumes_total",
			Help: "Takeovers of a predecessor's ZooKeeper session tried at start, by outcome: resumed, or too_late (the session had expired or its password was wrong; a new session was started).",
		}, []string{"outcome"})}
	r.outcomes.WithLabelValues("resumed")
	r.outcomes.WithLabelValues("too_late")
	if session == nil {
		r.finish(ErrNoResume)
	}
	return r
}

// Done is closed once the outcome is known.
func (r *Resume) Done() <-chan struct{} { return r.done }

// Err is the outcome once Done is closed: nil when the server gave the
// session back, an error wrapping ErrResumeTooLate when it did not, or
// ErrNoResume.
func (r *Resume) Err() error {
	<-r.done
	return r.err
}

// finish records the outcome (nil: resumed) the first time, logs and counts
// it.
func (r *Resume) finish(err error) {
	r.once.Do(func() {
		r.err = err
		close(r.done)
		if errors.Is(err, ErrNoResume) {
			return
		}
		id := fmt.Sprintf("0x%x", r.session.ID)
		if err == nil {
			r.outcomes.WithLabelValues("resumed").Inc()
			r.log.Info("zookeeper session resumed", "session", id)
			return
		}
		r.outcomes.WithLabelValues("too_late").Inc()
		r.log.Warn("zookeeper session not resumed, starting a new one", "session", id, "err", err)
	})
}
