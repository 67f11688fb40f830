package zookeeper

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/internal/tasks"
	"github.com/coord-sidecar/coord-sidecar/internal/zkwire"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/acl"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/transport"
)

// State is the sidecar's view of its ZooKeeper session.
type State int

// The session states. Only StateConnected lets a grant be claimed.
const (
	// StateConnecting: no session yet (first connection under way).
	StateConnecting State = iota
	// StateConnected: the session is established and the connection is up.
	StateConnected
	// StateSuspended: the connection dropped; the session may still live on the
	// server, so ownership is uncertain (Curator's SUSPENDED).
	StateSuspended
	// StateLost: ZooKeeper declared the session expired; every grant made
	// under it is gone. A new session is being established.
	StateLost
	// StateClosed: Close was called.
	StateClosed
)

var stateNames = [...]string{"connecting", "connected", "suspended", "lost", "closed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// StateChange is one transition of the session, as delivered to Subscribe
// callbacks. Event is the name clients see: "connected" (a new session),
// "suspended", "reconnected" (the same session is back) or "lost".
type StateChange struct {
	State     State
	Event     string
	SessionID int64
	At        time.Time
}

// Config configures a Session. NewSession fills in the defaults.
type Config struct {
	// Servers are the ZooKeeper servers, host:port.
	Servers []string
	// Timeout is the requested session timeout; the server may negotiate another.
	// Default 10s.
	Timeout time.Duration
	// Root is the znode under which every recipe keeps its nodes. Default "/coord".
	Root string
	// OpTimeout is the deadline of every single call whose context has no earlier
	// one (see Epoch.call). Default 10s.
	OpTimeout time.Duration
	// BackgroundReads is how many background reads (Background) run at once.
	// Default DefaultBackgroundReads.
	BackgroundReads int
	// Logger receives session state changes. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the session metrics; nil registers nothing.
	Registerer prometheus.Registerer
	// Auth, when set, is added to every connection before its session counts as
	// connected, and every node the sidecar creates then carries a creator-only
	// ACL (acl.ForCreate).
	Auth *acl.Credentials
	// TLS, when set, is how every connection is made: the server's certificate
	// is verified against it (ServerName defaults to the host of the server).
	TLS *tls.Config
	// RequireACL (only with Auth) makes ACLReady fail while the root or a
	// recipe parent is open to anyone (acl.Checker).
	RequireACL bool
	// ACLCheckEvery is how often, besides at every connect, the ACL of the
	// root and the recipe parents is read again while none is open (acl.Checker).
	// Default acl.DefaultCheckEvery.
	ACLCheckEvery time.Duration
	// Resume, when set, is a session to take over (a predecessor's, saved from
	// its Epoch.Resumable): the first epoch presents its id and password until
	// the server answers, and is that session if the server gives it back
	// (WaitResume tells which). Later epochs are new sessions.
	Resume *transport.Resumable
	// Incarnation, when set, has the Session record this process in each of
	// its sessions and verify the record at every reconnect (owner.go): for a
	// session whose password a successor may present.
	Incarnation *Incarnation
}

// Session holds one ZooKeeper session for the whole sidecar and replaces it when it
// expires. Every grant is made under one session (an Epoch); when that session
// expires, its Epoch's Lost channel closes and the grant is lost, never carried
// over to the next session.
//
// The state is taken from go-zookeeper's event callback, which only queues the event
// and never blocks; one goroutine of the Session applies the events in order and
// calls the Subscribe callbacks.
//
// Because a server expires a session on its own clock, the Session declares an
// epoch in doubt (doubt.go) when it is suspended and no call has succeeded for 2/3
// of the negotiated timeout (measured from when that call was sent, heartbeats
// every 1/10 of it). A server that answers a call sent at S has heard from the
// client at S or later, so it cannot expire the session before S + timeout: grants
// are reported lost a third of the timeout before the server can hand them to
// another client. The Session never abandons a session the server may still hold:
// it keeps reconnecting with it until the server gives it back or declares it
// expired; only then is the epoch lost and a new session made.
//
// Every goroutine the Session starts (its event loop, its heartbeat, the ACL
// checks (acl.go), the closing of abandoned connections, calls cut off by their deadline, Settle's background
// retries) is waited for by Close; once Close has begun, Go starts nothing.
type Session struct {
	cfg     Config
	log     *slog.Logger
	metrics sessionMetrics

	mu        sync.Mutex
	ep        *Epoch
	state     State
	lastID    int64 // id of the last session that was connected
	listeners map[int]func(StateChange)
	nextL     int
	changed   chan struct{} // closed and replaced on every state change
	// suspendedAt is when the connected session last became suspended; zero
	// while it is not suspended (Suspension).
	suspendedAt time.Time
	// inDoubt: the current suspension has lasted until the session could have
	// expired (doubt.go); false again at every state change.
	inDoubt bool
	// downSince is when the session was last connected (or the Session
	// started); zero while it is connected. warnings are the warnings of that
	// time without a connection (loud.go).
	downSince time.Time
	warnings  unreachableWarnings

	queueMu sync.Mutex
	queue   []queuedEvent
	wake    chan struct{}

	closing chan struct{}
	// tasks are the goroutines Close waits for (Go).
	tasks tasks.Group

	// live is the epoch while its session is connected, nil otherwise: calls
	// check it without a lock.
	live atomic.Pointer[Epoch]

	// lister coalesces concurrent listings of one parent (a burst of waiters).
	lister lister
	// unstamped remembers parents whose ACL refuses the stamp's write.
	unstamped sync.Map
	// knownPaths remembers persistent parents that exist (the sidecar never deletes
	// them), so the hot path does not create them again.
	knownPaths sync.Map
	// background holds one token per background read under way (Background).
	background chan struct{}
	// acls is the state of the ACL checks (acl.go).
	acls *acl.Checker
	// resume is the taking over of Config.Resume's session, and its outcome
	// (resume.go).
	resume *transport.Resume
	// waits counts the waits through a suspension, lastConnErr is the last
	// connection failure (suspendwait.go).
	waits       *waitMetrics
	lastConnErr lastConnErrs
}

type queuedEvent struct {
	ep *Epoch
	ev zk.Event
	// authed: ep's credentials were accepted (Session.authenticate), not a
	// go-zookeeper event.
	authed bool
	// verified: ep's connection of that number found this process's record
	// (Session.verify), not a go-zookeeper event.
	verified uint64
}

// Epoch is one ZooKeeper session: its connection, id and fate. Grants record the
// Epoch they were made under; calls on an Epoch that is not the connected one fail
// without being sent.
type Epoch struct {
	s       *Session
	conn    *zk.Conn
	id      atomic.Int64
	timeout atomic.Int64 // negotiated, in ns; 0 until known
	lastOK  atomic.Int64 // unix ns at which the newest successful call was sent
	// connects counts the times the session became connected (Connects).
	connects atomic.Uint64
	lost     chan struct{}
	once     sync.Once
	// doubt closes at the next doubt of the session and is then replaced;
	// doubts counts them (doubt.go). doubt is guarded by s.mu.
	doubt  chan struct{}
	doubts atomic.Uint64
	txns   *GroupCommit[*txnReq] // shared transactions (txn.go)
	gone   goneWatches           // nodes whose deletion someone waits for (calls.go)
	// authed is true once the Session's credentials (if any) are accepted on
	// this connection; hasSession while go-zookeeper reports a session. Both
	// are needed to count as connected. Guarded by s.mu.
	authed, hasSession bool
	// hs is the epoch's handshakes: the session it presents and the server's
	// answers (internal/zookeeper/transport).
	hs *transport.Handshake
	// zxids keeps the last zxid seen on the wire, out of go-zookeeper's
	// racing field (see internal/zkwire).
	zxids zkwire.Zxids
	// The claim on the session (owner.go, with Config.Incarnation): claimed
	// closes once this process's record is written (landed tells it, false
	// again while a deleted record is written anew); conns numbers the
	// session's connections and verified says the current one found the
	// record (both guarded by s.mu); takenOnce tells TakenOver once.
	claimed              chan struct{}
	claimOnce, takenOnce sync.Once
	landed               atomic.Bool
	conns                uint64
	verified             bool
}

// checked is cfg refused when it cannot make a session, or with its
// defaults filled in and the session to resume copied.
func (cfg Config) checked() (Config, error) {
	if len(cfg.Servers) == 0 {
		return cfg, fmt.Errorf("no ZooKeeper servers given")
	}
	if cfg.RequireACL && cfg.Auth == nil {
		return cfg, fmt.Errorf("RequireACL needs Auth: without credentials every node is open to anyone")
	}
	if r := cfg.Resume; r != nil {
		if r.ID == 0 || len(r.Password) == 0 {
			return cfg, fmt.Errorf("the session to resume needs an id and a password")
		}
		cfg.Resume = &transport.Resumable{ID: r.ID, Password: bytes.Clone(r.Password), Timeout: r.Timeout}
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 10 * time.Second
	}
	if cfg.Root == "" {
		cfg.Root = "/coord"
	}
	if cfg.ACLCheckEvery <= 0 {
		cfg.ACLCheckEvery = acl.DefaultCheckEvery
	}
	if cfg.BackgroundReads <= 0 {
		cfg.BackgroundReads = DefaultBackgroundReads
	}
	if cfg.Root != "/" {
		cfg.Root = strings.TrimRight(cfg.Root, "/")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg, nil
}

// NewSession starts connecting to ZooKeeper and returns at once: the sidecar serves
// (and reports unavailable) while ZooKeeper is unreachable. Close ends it.
func NewSession(cfg Config) (*Session, error) {
	cfg, err := cfg.checked()
	if err != nil {
		return nil, err
	}
	s := &Session{
		cfg:        cfg,
		log:        cfg.Logger,
		metrics:    newSessionMetrics(cfg.Registerer),
		listeners:  map[int]func(StateChange){},
		changed:    make(chan struct{}),
		wake:       make(chan struct{}, 1),
		closing:    make(chan struct{}),
		background: make(chan struct{}, cfg.BackgroundReads),
		waits:      newWaitMetrics(cfg.Registerer),
		downSince:  time.Now(),
	}
	s.acls = acl.NewChecker(acl.Config{Root: cfg.Root, Every: cfg.ACLCheckEvery, Timeout: cfg.OpTimeout,
		Require: cfg.RequireACL, Logger: s.log, Registerer: cfg.Registerer})
	s.metrics.setState(StateConnecting)
	s.resume = transport.NewResume(cfg.Resume, s.log, cfg.Registerer)
	ep, err := s.dial(s.resume)
	if err != nil {
		return nil, err
	}
	s.ep = ep
	s.Go(s.run)
	s.Go(s.heartbeats)
	if cfg.Auth != nil {
		s.Go(s.checkACLs)
	}
	return s, nil
}

// Go runs f on a goroutine that Close waits for and reports true, or, once
// Close has begun, starts nothing and reports false: the caller then does
// without (whatever f would have done for a session is moot once it is closed)
// or runs f itself. f must return once the Session's epochs are lost (they all
// are after Close).
func (s *Session) Go(f func()) bool { return s.tasks.Go(f) }

// Root is the znode under which recipes keep their nodes.
func (s *Session) Root() string { return s.cfg.Root }

// Logger is the logger the Session was configured with (Config.Logger), for the
// recipes' own log lines.
func (s *Session) Logger() *slog.Logger { return s.log }

// OpTimeout is the deadline of a call whose context has none.
func (s *Session) OpTimeout() time.Duration { return s.cfg.OpTimeout }

// dial opens a new connection; its session (resume's, if the server gives it
// back, else a new one) is established in the background.
func (s *Session) dial(resume *transport.Resume) (*Epoch, error) {
	ep := &Epoch{s: s, lost: make(chan struct{}), doubt: make(chan struct{}), authed: s.cfg.Auth == nil, claimed: make(chan struct{})}
	ep.hs = transport.NewHandshake(resume, s.log)
	ep.txns = newTxnWriter(ep)
	dialer, hosts := transport.Dialer(s.cfg.TLS, s.cfg.Timeout, s.log)
	conn, _, err := zk.Connect(s.cfg.Servers, s.cfg.Timeout,
		zk.WithEventCallback(func(ev zk.Event) { s.enqueue(ep, ev) }),
		zk.WithLogger(zkLogger{ep: ep, log: s.log}),
		zk.WithMaxBufferSize(4<<20),
		zk.WithDialer(ep.hs.Dialer(dialer, ep.zxids.Wrap)), zk.WithHostProvider(hosts),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to ZooKeeper: %w", err)
	}
	ep.conn = conn
	if !ep.authed {
		s.Go(func() { s.authenticate(ep) })
	}
	return ep, nil
}

// enqueue is go-zookeeper's event callback: it never blocks.
func (s *Session) enqueue(ep *Epoch, ev zk.Event) {
	if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNodeDataChanged {
		if !s.recordEvent(ep, ev) { // owner.go
			ep.goneEvent(ev)
		}
		return
	}
	if ev.Type != zk.EventSession {
		return
	}
	s.enqueueEvent(queuedEvent{ep: ep, ev: ev})
}

func (s *Session) enqueueEvent(e queuedEvent) {
	s.queueMu.Lock()
	s.queue = append(s.queue, e)
	s.queueMu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run applies session events in order until Close.
func (s *Session) run() {
	for {
		select {
		case <-s.closing:
			return
		case <-s.wake:
			s.queueMu.Lock()
			q := s.queue
			s.queue = nil
			s.queueMu.Unlock()
			for _, e := range q {
				s.apply(e)
			}
		}
	}
}

func (s *Session) heartbeatEvery() time.Duration {
	return max(s.cfg.Timeout/10, 20*time.Millisecond)
}

// heartbeats declares the suspended epoch in doubt (doubt.go) once no call has
// succeeded for 2/3 of the session timeout, checking every tenth of it, and
// asks pings for one cheap read each time while connected (its success proves
// the server heard from us). The read runs on pings' goroutine, so a read that
// hangs never delays the check. A connection that goes silent while connected
// is dropped by go-zookeeper itself within 2/3 of the timeout after its last
// answer (its receive deadline), which makes the session suspended. No epoch is
// ever abandoned here: only the server's word (zk.StateExpired) loses one.
func (s *Session) heartbeats() {
	tick := time.NewTicker(s.heartbeatEvery())
	defer tick.Stop()
	ping := make(chan *Epoch, 1)
	s.Go(func() { s.pings(ping) })
	for {
		select {
		case <-s.closing:
			return
		case <-tick.C:
		}
		s.warnUnreachable(time.Now())
		s.mu.Lock()
		ep, st := s.ep, s.state
		s.mu.Unlock()
		if st != StateConnected && st != StateSuspended {
			continue
		}
		if st == StateSuspended {
			s.checkDoubt(ep, time.Now())
			continue
		}
		if st == StateConnected {
			select {
			case ping <- ep:
			default: // the previous read is still under way
			}
		}
	}
}

// pings sends the heartbeats' reads, one at a time, until Close.
func (s *Session) pings(ping <-chan *Epoch) {
	for {
		select {
		case <-s.closing:
			return
		case ep := <-ping:
			ctx, cancel := context.WithTimeout(context.Background(), ep.SessionTimeout()/2)
			_, _, _ = ep.Exists(ctx, "/")
			cancel()
		}
	}
}

// apply runs on the Session's goroutine, one event at a time.
func (s *Session) apply(e queuedEvent) {
	ep, ev := e.ep, e.ev
	s.mu.Lock()
	if ep != s.ep || s.state == StateClosed {
		s.mu.Unlock()
		return // an event of an abandoned connection
	}
	if e.authed {
		ep.authed = true
		if ep.hasSession && ep.verified {
			s.connectedLocked(ep)
		}
		s.mu.Unlock()
		return
	}
	if e.verified != 0 {
		s.verifiedLocked(ep, e.verified)
		s.mu.Unlock()
		return
	}
	switch ev.State {
	case zk.StateHasSession:
		s.hasSessionLocked(ep)
		s.mu.Unlock()
	case zk.StateDisconnected:
		ep.hasSession = false
		if s.state == StateConnected {
			s.setLocked(StateSuspended, "suspended", ep.id.Load())
		}
		s.mu.Unlock()
	case zk.StateExpired:
		s.mu.Unlock()
		if ep.refusedFirst() {
			return // Config.Resume's session is gone; go-zookeeper makes a new one
		}
		s.lose(ep, "ZooKeeper reported the session expired")
	default:
		s.mu.Unlock()
	}
}

// connectedLocked records that ep's session is connected (and authenticated).
// s.mu is held.
func (s *Session) connectedLocked(ep *Epoch) {
	ep.hs.Unanswered()
	id := ep.conn.SessionID()
	ep.id.Store(id)
	ep.connects.Add(1)
	ep.touch(time.Now())
	name := "connected"
	if s.state == StateSuspended && id == s.lastID {
		name = "reconnected"
	}
	s.lastID = id
	s.lastConnErr.reset()
	s.setLocked(StateConnected, name, id)
	if s.claiming() && ep.connects.Load() == 1 {
		s.Go(func() { s.claim(ep) })
	}
}

// lose declares ep's session lost (the server declared it expired), closes its
// connection and dials a new one.
func (s *Session) lose(ep *Epoch, why string) {
	s.mu.Lock()
	if ep != s.ep || s.state == StateClosed {
		s.mu.Unlock()
		return
	}
	ep.markLost()
	s.metrics.expirations.Inc()
	s.setLocked(StateLost, "lost", ep.id.Load())
	s.log.Warn("zookeeper session lost", "session", fmt.Sprintf("0x%x", ep.id.Load()), "why", why)
	next, err := s.dial(nil)
	if err == nil {
		s.ep = next
	}
	s.mu.Unlock()
	if !s.Go(ep.conn.Close) { // never reused; the server expires it (if it has not already)
		ep.conn.Close() // Close has begun: it closes only the current connection
	}
	if err != nil {
		s.log.Error("zookeeper redial failed", "err", err)
	}
}

// setLocked records a state change and notifies listeners. s.mu is held.
func (s *Session) setLocked(st State, event string, id int64) {
	switch {
	case st == StateSuspended && s.state != StateSuspended:
		s.suspendedAt = time.Now()
	case st != StateSuspended:
		s.suspendedAt = time.Time{}
	}
	switch {
	case st == StateConnected:
		s.downSince = time.Time{}
	case s.downSince.IsZero():
		s.downSince = time.Now()
	}
	s.state = st
	s.inDoubt = false
	if st == StateConnected {
		s.live.Store(s.ep)
	} else {
		s.live.Store(nil)
	}
	s.metrics.setState(st)
	close(s.changed)
	s.changed = make(chan struct{})
	ch := StateChange{State: st, Event: event, SessionID: id, At: time.Now()}
	s.log.Info("zookeeper session", "event", event, "session", fmt.Sprintf("0x%x", id), "server", s.ep.conn.Server())
	for _, fn := range s.listeners {
		fn(ch)
	}
}

// Subscribe calls fn with every later state change, in order, from the Session's
// goroutine, under the Session's lock: fn must not block nor call the Session.
// cancel stops the calls.
func (s *Session) Subscribe(fn func(StateChange)) (cancel func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := s.nextL
	s.nextL++
	s.listeners[id] = fn
	return func() {
		s.mu.Lock()
		delete(s.listeners, id)
		s.mu.Unlock()
	}
}

// SessionInfo describes the session at one moment.
type SessionInfo struct {
	State     State
	SessionID int64
	Server    string
	Timeout   time.Duration
	// Resumed tells that the session is the one Config.Resume named, taken
	// over from a predecessor at ResumedAt (when the server gave it back).
	Resumed   bool
	ResumedAt time.Time
	// LastError is the last failure to connect to a server, or of a
	// connection, since the session was last connected ("" when none), on
	// the server LastErrorOn, at LastErrorAt.
	LastError   string
	LastErrorOn string
	LastErrorAt time.Time
}

// Info returns the current state, session id, server and negotiated timeout,
// whether the session was taken over from a predecessor (Config.Resume), and
// the last connection failure since the session was last connected.
func (s *Session) Info() SessionInfo {
	s.mu.Lock()
	ep, st := s.ep, s.state
	s.mu.Unlock()
	info := SessionInfo{State: st, Timeout: ep.SessionTimeout(), ResumedAt: ep.resumedAt()}
	info.Resumed = !info.ResumedAt.IsZero()
	if last := s.lastConnErr.Load(); last != nil {
		info.LastError, info.LastErrorOn, info.LastErrorAt = last.err, last.server, last.at
	}
	if st == StateConnected || st == StateSuspended {
		info.SessionID = ep.id.Load()
		info.Server = ep.conn.Server()
	}
	return info
}

// State returns the current state.
func (s *Session) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Changed returns a channel closed at the next state change, and when the
// session is declared in doubt (InDoubt).
func (s *Session) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// WaitCurrent waits until the session is connected and returns its Epoch;
// ErrClosed after Close, ErrUnavailable wrapping ctx's error if ctx ends first.
func (s *Session) WaitCurrent(ctx context.Context) (*Epoch, error) {
	for {
		changed := s.Changed()
		ep, err := s.Current()
		if err == nil || errors.Is(err, ErrClosed) {
			return ep, err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}

// LastZxid is the newest zxid an answer to ep's session has carried (see
// internal/zkwire): what a successor presents when it resumes the session.
func (ep *Epoch) LastZxid() int64 { return ep.zxids.Last() }

// Current returns the connected Epoch, or ErrUnavailable naming the servers
// and the last connection failure (Unreachable); ErrClosed after Close.
func (s *Session) Current() (*Epoch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.state {
	case StateConnected:
		return s.ep, nil
	case StateClosed:
		return nil, ErrClosed
	default:
		return nil, fmt.Errorf("%w: session %s; %s", ErrUnavailable, s.state, s.Unreachable())
	}
}

// Close closes the ZooKeeper session: the server deletes its ephemeral nodes at
// once. Every epoch is marked lost, and Close returns once every goroutine of the
// Session has ended. Close is idempotent. (Detach ends the Session but leaves
// the ZooKeeper session to a successor.)
func (s *Session) Close() { s.end(false) }

// end is Close, or with detach Detach.
func (s *Session) end(detach bool) {
	s.mu.Lock()
	if s.state == StateClosed {
		s.mu.Unlock()
		s.tasks.Close()
		return
	}
	ep := s.ep
	s.setLocked(StateClosed, "closed", ep.id.Load())
	s.mu.Unlock()
	close(s.closing)
	if detach {
		ep.hs.Detach()
		s.log.Info("zookeeper session detached: left to another process (a successor, or one that took it over)", "session", fmt.Sprintf("0x%x", ep.id.Load()))
	}
	ep.conn.Close()
	ep.markLost()
	s.tasks.Close()
}

func (ep *Epoch) markLost() { ep.once.Do(func() { close(ep.lost) }) }

// ID is the ZooKeeper session id (0 until the session is established).
func (ep *Epoch) ID() int64 { return ep.id.Load() }

// Lost is closed when this session is lost: ZooKeeper declared it expired, or
// the Session was closed (or detached). A suspension, however long, never
// closes it: see Doubted.
func (ep *Epoch) Lost() <-chan struct{} { return ep.lost }

// IsLost tells whether Lost is closed.
func (ep *Epoch) IsLost() bool {
	select {
	case <-ep.lost:
		return true
	default:
		return false
	}
}

// Connected tells whether this is the connected session now.
func (ep *Epoch) Connected() bool { return ep.s.live.Load() == ep }

// Connects is how many times ep's session has become connected: a reconnect of
// the same session counts. Watches set before a reconnect may report what
// changed while disconnected only some time after calls work again (go-zookeeper
// re-sends them after it reports the session back), so what relies on a watch's
// silence relies on it only while this count stays the same.
func (ep *Epoch) Connects() uint64 { return ep.connects.Load() }

// Session is the Session this epoch belongs to.
func (ep *Epoch) Session() *Session { return ep.s }

func (ep *Epoch) touch(sent time.Time) {
	n := sent.UnixNano()
	for {
		old := ep.lastOK.Load()
		if n <= old || ep.lastOK.CompareAndSwap(old, n) {
			return
		}
	}
}

// SessionTimeout is the negotiated session timeout (the requested one until known).
func (ep *Epoch) SessionTimeout() time.Duration {
	if t := ep.timeout.Load(); t > 0 {
		return time.Duration(t)
	}
	return ep.s.cfg.Timeout
}

// WaitConnected blocks until ep's session is connected again (nil), ep is lost
// (ErrSessionLost) or ctx ends (ErrUnavailable wrapping ctx's error).
func (ep *Epoch) WaitConnected(ctx context.Context) error {
	for {
		changed := ep.s.Changed()
		cur, err := ep.s.Current()
		if cur == ep {
			return nil
		}
		if ep.IsLost() || err == ErrClosed {
			return ErrSessionLost
		}
		select {
		case <-changed:
		case <-ep.lost:
			return ErrSessionLost
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
}

// Retry runs f until it returns anything but ErrUnavailable, waiting before
// each new try until ep's session is connected again: for work that may run
// twice (reads, deletes that accept ErrNoNode) and must outlast a connection
// that drops and comes back, as when the server it was on dies. It returns
// f's last error; ErrSessionLost once ep is lost; f's ErrUnavailable once ctx
// has ended.
func (ep *Epoch) Retry(ctx context.Context, f func() error) error {
	for {
		err := f()
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrSessionLost) {
			return err
		}
		switch werr := ep.WaitConnected(ctx); {
		case errors.Is(werr, ErrSessionLost):
			return fmt.Errorf("%w (after: %v)", werr, err)
		case werr != nil:
			return err
		}
	}
}

// zkLogger routes go-zookeeper's log lines to slog at debug level, and reads the
// negotiated session timeout from its "authenticated" line (go-zookeeper exposes it
// no other way).
type zkLogger struct {
	ep  *Epoch
	log *slog.Logger
}

func (l zkLogger) Printf(format string, args ...any) {
	if strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok && ms > 0 {
			l.ep.timeout.Store(int64(time.Duration(ms) * time.Millisecond))
		}
	}
	l.noteLog(format, args)
	l.log.Debug("zk: " + fmt.Sprintf(format, args...))
}

type sessionMetrics struct {
	state       *prometheus.GaugeVec
	expirations prometheus.Counter
	// connFailures counts failed connections to a server (suspendwait.go's
	// noteLog): a dial refused or timed out, a handshake that failed, a
	// connection that ended.
	connFailures prometheus.Counter
	// doubts counts suspensions that lasted until the session could have
	// expired (doubt.go).
	doubts prometheus.Counter
	// txns and txnRequests count shared transactions and the callers' requests
	// they carried (txn.go): their ratio is how many callers one shares.
	txns, txnRequests prometheus.Counter
	// backgroundWaiting counts the background reads waiting for a slot.
	backgroundWaiting prometheus.Gauge
}

func newSessionMetrics(reg prometheus.Registerer) sessionMetrics {
	f := promauto.With(reg)
	return sessionMetrics{
		state: f.NewGaugeVec(prometheus.GaugeOpts{
			Name: "coord_zk_session_state",
			Help: "1 for the ZooKeeper session's current state (connecting, connected, suspended, lost, closed), 0 for the others.",
		}, []string{"state"}),
		expirations: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_zk_session_expirations_total",
			Help: "ZooKeeper sessions lost (declared expired by ZooKeeper).",
		}),
		connFailures: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_zk_connection_failures_total",
			Help: "Failed connections to a ZooKeeper server: a dial refused or timed out, a handshake that failed, a connection that ended. Rising while coord_zk_session_state is not connected: a dead or wrong --zk, or the ensemble away.",
		}),
		doubts: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_zk_session_doubts_total",
			Help: "Suspensions that lasted until the session could have expired (2/3 of the session timeout since ZooKeeper last answered): what the session held was reported lost, and the same session tried again.",
		}),
		txns: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_zk_shared_transactions_total",
			Help: "ZooKeeper transactions sent for lock and election contenders' creates and deletes, each shared by one or more requests.",
		}),
		txnRequests: f.NewCounter(prometheus.CounterOpts{
			Name: "coord_zk_shared_transaction_requests_total",
			Help: "Requests carried by those shared transactions.",
		}),
		backgroundWaiting: f.NewGauge(prometheus.GaugeOpts{
			Name: "coord_zk_background_reads_waiting",
			Help: "Followers waiting for one of the session's background read slots (a burst of first reads, such as the whole picture's, is read a few at a time).",
		}),
	}
}

func (m sessionMetrics) setState(st State) {
	for i, n := range stateNames {
		v := 0.0
		if State(i) == st {
			v = 1
		}
		m.state.WithLabelValues(n).Set(v)
	}
}
