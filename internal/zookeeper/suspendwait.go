package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Waiting through a suspension. While the connection to ZooKeeper is away (a
// server restarting, the ensemble electing its leader), an operation made
// under a context from WithSuspendWait waits for it to come back instead of
// failing at once, and then goes on as if it had just begun: Session.Await
// (the connected session, waited for), Epoch.AwaitConnected (one session,
// waited for), and every call of an Epoch, which waits before it sends.
// Nothing is sent twice unless it is a read or was never sent: a read whose
// answer was lost with the connection is sent again once the same session is
// back, a request go-zookeeper gave up before sending it (zk.ErrNoServer) too;
// a write whose answer was lost is left to its caller, which checks on return
// (CreateProtected, CreateOwned) or reports it unavailable.
//
// A context without the allowance keeps the old behaviour: ErrUnavailable at
// once while the session is not connected.
//
// The waits of a call itself (Epoch.AwaitConnected before it is sent,
// Epoch.resend before it is sent again) stand in calls.go, beside the calls.

type suspendWaitKey struct{}

type suspendWait struct {
	wait  time.Duration // how long one wait may last
	until time.Time     // the end of the caller's own wait; zero: none
}

// WithSuspendWait returns a context under which the Session's calls, Await and
// AwaitConnected wait for a suspended (or replaced) session's connection to come
// back, each wait for at most wait, or until until (the end of the caller's own
// wait) when that is later. With wait <= 0 and until zero nothing waits, even
// if ctx allowed it.
func WithSuspendWait(ctx context.Context, wait time.Duration, until time.Time) context.Context {
	return &suspendWaitCtx{ctx, suspendWait{wait: max(wait, 0), until: until}}
}

// suspendWaitCtx is a context carrying a suspendWait: what context.WithValue
// would make, in one allocation instead of two (its context and the value
// boxed), on every request. Its Value of suspendWaitKey is a *suspendWait;
// everything else is its parent's.
type suspendWaitCtx struct {
	context.Context
	sw suspendWait
}

func (c *suspendWaitCtx) Value(key any) any {
	if _, ok := key.(suspendWaitKey); ok {
		return &c.sw
	}
	return c.Context.Value(key)
}

func (c *suspendWaitCtx) String() string {
	return fmt.Sprintf("%v.WithSuspendWait(%v, %v)", c.Context, c.sw.wait, c.sw.until)
}

// suspendWaitOf returns the suspendWait ctx carries, if any.
func suspendWaitOf(ctx context.Context) (suspendWait, bool) {
	sw, ok := ctx.Value(suspendWaitKey{}).(*suspendWait)
	if !ok {
		return suspendWait{}, false
	}
	return *sw, true
}

// Await returns the connected Epoch, as Current does. While the session is
// not connected (suspended, connecting, or lost and being replaced) and ctx
// allows it (WithSuspendWait), it waits for a connected session, whichever it
// is, and returns it; past the allowance it returns ErrUnavailable naming the
// servers and the last connection error. ErrClosed after Close.
func (s *Session) Await(ctx context.Context) (*Epoch, error) {
	ep, err := s.Current()
	if err == nil || errors.Is(err, ErrClosed) {
		return ep, err
	}
	start := time.Now()
	end, ok := suspendBound(ctx, start)
	if !ok {
		return nil, err
	}
	s.waits.begin()
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	for {
		changed := s.Changed()
		ep, err := s.Current()
		if err == nil || errors.Is(err, ErrClosed) {
			s.waits.observe(outcomeBack, start)
			return ep, err
		}
		select {
		case <-changed:
		case <-t.C:
			s.waits.observe(outcomeTimeout, start)
			return nil, s.notBack(start)
		case <-ctx.Done():
			s.waits.observe(outcomeGone, start)
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}

// errNotBack is the cause of a wait that ended before the connection came back.
var errNotBack = errors.New("the connection to ZooKeeper did not come back")

// notBack is the error of a wait that ended before the connection came back:
// the servers, how long, and the last failure of a connection to them.
func (s *Session) notBack(start time.Time) error {
	var b strings.Builder
	fmt.Fprintf(&b, "within %s", time.Since(start).Round(time.Millisecond))
	if since, ok := s.Suspension(); ok {
		fmt.Fprintf(&b, " (suspended since %s)", since.UTC().Format(time.RFC3339Nano))
	} else {
		fmt.Fprintf(&b, " (session %s)", s.State())
	}
	fmt.Fprintf(&b, "; %s", s.Unreachable())
	return fmt.Errorf("%w: %w %s", ErrUnavailable, errNotBack, b.String())
}

// Unreachable says what the Session knows of why it has no connection: the
// servers it tries and, when one failed since the session was last
// connected, the last failure, when and on which server. For the detail of a
// 503 and of /readyz.
func (s *Session) Unreachable() string {
	var b strings.Builder
	fmt.Fprintf(&b, "servers tried: %s", strings.Join(s.cfg.Servers, ", "))
	if last := s.lastConnErr.Load(); last != nil {
		fmt.Fprintf(&b, "; last error %s ago", time.Since(last.at).Round(time.Millisecond))
		if last.server != "" {
			fmt.Fprintf(&b, " on %s", last.server)
		}
		fmt.Fprintf(&b, ": %s", last.err)
	}
	return b.String()
}

// connErr is a connection's failure as go-zookeeper logged it.
type connErr struct {
	server, err string
	at          time.Time
}

// lastConnErrs keeps the server go-zookeeper last connected to and its last
// connection failure since the session was last connected (the Session's
// lastConnErr), and how many failures there were since then.
type lastConnErrs struct {
	mu     sync.Mutex
	server string // the last server a connection was made to
	last   *connErr
	fails  int
}

// Load returns the last failure, nil when none was seen.
func (l *lastConnErrs) Load() *connErr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last
}

// failures returns the last failure and the count of them.
func (l *lastConnErrs) failures() (*connErr, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.last, l.fails
}

// reset forgets the failures: the session is connected.
func (l *lastConnErrs) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last, l.fails = nil, 0
}

// noteLog keeps the last connection failure go-zookeeper logs (a refused or
// timed out dial, a handshake that failed, a connection that ended), for the
// detail of a wait that ends before the connection is back (notBack), for
// Unreachable and for the warnings of unreachable servers (loud.go).
//
// A lost epoch's lines are not kept: its connection is closed on purpose,
// after the Session has moved on to a new one.
func (l zkLogger) noteLog(format string, args []any) {
	if l.ep.IsLost() {
		return
	}
	t := &l.ep.s.lastConnErr
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func(before *connErr) {
		if t.last != before {
			t.fails++
			l.ep.s.metrics.connFailures.Inc()
		}
	}(t.last)
	switch {
	case strings.HasPrefix(format, "connected to ") && len(args) == 1:
		t.server = fmt.Sprint(args[0])
	case strings.HasPrefix(format, "failed to connect to ") && len(args) == 2:
		t.last = &connErr{server: fmt.Sprint(args[0]), err: fmt.Sprint(args[1]), at: time.Now()}
	case strings.HasPrefix(format, "authentication failed: ") && len(args) == 1:
		t.last = &connErr{server: t.server, err: "handshake: " + fmt.Sprint(args[0]), at: time.Now()}
	case strings.HasPrefix(format, "recv loop terminated: ") && len(args) == 1:
		t.last = &connErr{server: t.server, err: "connection ended: " + fmt.Sprint(args[0]), at: time.Now()}
	}
}

// Outcomes of a wait through a suspension.
const (
	outcomeBack    = "back"    // the connection came back: the request went on
	outcomeTimeout = "timeout" // the allowance ended first: 503
	outcomeLost    = "lost"    // the session the request needed was lost
	outcomeGone    = "gone"    // the request's context ended (client gone, shutdown)
)

// waitMetrics counts the waits through a suspension, by outcome, and how long
// they lasted.
type waitMetrics struct {
	seconds *prometheus.HistogramVec
	waiting prometheus.Gauge
	// lost counts writes whose answer was lost with their connection, by what
	// the check after it found (lostwrite.go).
	lost *prometheus.CounterVec
}

func newWaitMetrics(reg prometheus.Registerer) *waitMetrics {
	f := promauto.With(reg)
	m := &waitMetrics{seconds: f.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "coord_request_suspension_wait_seconds",
		Help:    "How long a request waited for the connection to ZooKeeper to come back, by outcome: back (it went on), timeout (503 after --suspend-wait), lost (its session expired), gone (its client or the server went away).",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60},
	}, []string{"outcome"}),
		waiting: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_request_suspension_waiting",
			Help: "Requests waiting for the connection to ZooKeeper to come back right now.",
		}),
		lost: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_write_answer_lost_total",
			Help: "Writes whose answer was lost with their connection to ZooKeeper, by what the check once it was back found: applied (answered from the node), resent (not applied: sent again), unknown (503: it cannot be told).",
		}, []string{"outcome"})}
	for _, o := range []string{outcomeBack, outcomeTimeout, outcomeLost, outcomeGone} {
		m.seconds.WithLabelValues(o)
	}
	for _, o := range []string{"applied", "resent", "unknown"} {
		m.lost.WithLabelValues(o)
	}
	return m
}

// begin counts a wait under way; observe ends it.
func (m *waitMetrics) begin() { m.waiting.Inc() }

func (m *waitMetrics) observe(outcome string, start time.Time) {
	m.waiting.Dec()
	m.seconds.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}

// CarrySuspendWait returns dst allowed to wait through a suspension as src is
// (WithSuspendWait), and how long one wait may last from now (0: src allows
// none): for work done under a context of its own on behalf of a request.
func CarrySuspendWait(dst, src context.Context) (context.Context, time.Duration) {
	sw, ok := suspendWaitOf(src)
	if !ok {
		return dst, 0
	}
	end, _ := suspendBound(src, time.Now())
	return &suspendWaitCtx{dst, sw}, max(time.Until(end), 0)
}
