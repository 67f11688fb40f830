package api

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/api/specrules"
	"github.com/coord-sidecar/coord-sidecar/api/tokens"
	"github.com/coord-sidecar/coord-sidecar/internal/tasks"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Options configures the HTTP layer.
type Options struct {
	Session *zookeeper.Session
	Leases  *kit.Leases

	// Tokens, once Set, are the bearer tokens /v1 accepts (each with what it
	// may do; an empty list refuses every request); nil, or never Set, /v1
	// needs no token. The caller may Set new tokens at any time (a SIGHUP
	// reload).
	Tokens *tokens.Tokens
	// AllowedHosts is the Host allow-list (empty: every host; see
	// DefaultAllowedHosts); AllowedOrigins are the browser origins allowed
	// besides the sidecar's own ("https://app.example.com").
	AllowedHosts   HostList
	AllowedOrigins []string
	// MaxLeases caps live leases (default 100000); past it, 429 too-many-leases.
	MaxLeases int
	// BodyTimeout is how long a client has to send a request body, from the end
	// of its headers (default 30s); streams and bodiless requests have no limit.
	BodyTimeout time.Duration
	// MaxWait caps wait= (default 5m); MaxTTL caps ttl= (default 1h);
	// DefaultTTL is the ttl of implicit leases (default 60s).
	MaxWait, MaxTTL, DefaultTTL time.Duration
	// MaxBody caps request bodies in bytes (default 1 MiB).
	MaxBody int64
	// MaxItem caps a queue item in bytes (default 512 KiB; ZooKeeper's
	// jute.maxbuffer of 1 MiB bounds one node's data).
	MaxItem int64
	// Heartbeat is the SSE comment interval (default 15s).
	Heartbeat time.Duration
	// MaxStreams caps open event streams (default 16384) and MaxWaiters caps
	// long-polls under way (requests with a non-zero wait=, default 8192); past
	// either, requests answer 503 with Retry-After.
	MaxStreams, MaxWaiters int
	// SuspendWait is how long a request that needs ZooKeeper waits for a
	// suspended connection to come back before it answers 503
	// zookeeper-unavailable (longer when the rest of its own wait= is), and how
	// long /readyz stays 200 through a suspension; 0: no wait (the sidecar's
	// --suspend-wait, by default its session timeout).
	SuspendWait time.Duration
	// Restored, when set, is closed once a restart's resume is reconciled
	// (--state-dir): until then /v1 requests wait for it (a lease of the
	// predecessor is not yet known: answering 404 would be a lie) and /readyz
	// answers 503. Nil: nothing to wait for.
	Restored <-chan struct{}
	// State, when set (--state-dir), is where every change is written before
	// its answer is sent (commitState); nil: nothing is kept.
	State StateDir
	// Spec is served at GET /openapi.yaml.
	Spec []byte
	// RecipeFlags are the values of the recipes' own flags (api.Flagged) the
	// command line or the environment set, by flag name; a flag absent has
	// its Default.
	RecipeFlags map[string]string
	// Registerer and Gatherer: the one metrics registry of the process.
	Registerer prometheus.Registerer
	Gatherer   prometheus.Gatherer
	Logger     *slog.Logger
}

// Server is what every recipe's HTTP side shares: the middleware, problems,
// paging, the leases and tokens of a request, the broker and its streams, the
// picture; and the operations of no recipe (session, health, the picture's
// stream; the leases' are in api/leases). api/registry composes it with the
// recipes' handlers into the StrictServerInterface. Close ends its streams and
// long-polls.
type Server struct {
	opt     Options
	log     *slog.Logger
	metrics httpMetrics

	// stopped ends, with cause errShuttingDown, when Close is called.
	stopped context.Context
	// base is stopped with the allowance of a wait through a suspension
	// (Options.SuspendWait): every request's context derives from it.
	base context.Context
	stop context.CancelCauseFunc
	// draining ends when streams and long-polls must end: at Close, or first
	// at Drain (a hand-over), which lets short requests finish as usual.
	draining context.Context
	drain    context.CancelCauseFunc

	// broker fans state out to SSE subscribers; topics are followed only while
	// they have subscribers (see topics.go).
	broker *sse.Broker
	reaper *sse.Reaper
	// following holds how to stop following each active topic (topics.go).
	following map[string]func()
	// What the recipes registered (Register; read-only once the server
	// serves): their topic followers by topic kind, the picture's sections,
	// each section's token kind, the token kinds, and the problems of their
	// own errors.
	topics        map[string]func(topic, name string) (stop func())
	sections      []picture.Section
	sectionTokens map[string]string
	// nested are the token kinds whose names may contain "/" (Descriptor.NestedNames).
	nested     map[string]func(method string, segs []string) int
	tokenKinds []string
	problems   []ProblemRule

	// hijacked are the goroutines serving hijacked streams: Close waits for
	// them, and a stream opened after that is served on its request's goroutine.
	hijacked tasks.Group
	session  sessionTopic

	// streams and waiters are semaphores bounding open streams and long-polls;
	// held counts each token's, against its share.
	streams, waiters chan struct{}
	held             tokenHolds
	polls            pollSet // the streams and long-polls under way, ended by drain

	// rules are what the spec declares of each operation's query and JSON body
	// (unknown.go, bodies.go).
	rules *specrules.Rules

	// grantMu makes the --max-leases check and the grant one step.
	grantMu sync.Mutex
	// ticketKey signs the status page's ticket cookies (auth.go).
	ticketKey []byte
	// hosts is Options.AllowedHosts, split once.
	hosts hostMatcher
	// lines writes the request lines (front.go); Close ends its goroutine.
	lines *requestLines
}

// loadRules are the body and query rules of the embedded openapi.yaml, read
// once per process: the servers of a process only read them, and parsing the
// spec is most of what making a server costs (a test process makes hundreds).
// Only the rules are kept: the parsed spec around them is garbage once they
// are made.
var loadRules = sync.OnceValues(func() (*specrules.Rules, error) {
	spec, err := oapi.GetSpec()
	if err != nil {
		return nil, err
	}
	return specrules.New(spec), nil
})

// NewServer checks the options and fills in defaults.
func NewServer(opt Options) *Server {
	if opt.MaxWait <= 0 {
		opt.MaxWait = 5 * time.Minute
	}
	if opt.MaxTTL <= 0 {
		opt.MaxTTL = time.Hour
	}
	if opt.DefaultTTL <= 0 {
		opt.DefaultTTL = 60 * time.Second
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = 1 << 20
	}
	if opt.MaxItem <= 0 {
		opt.MaxItem = 512 << 10
	}
	if opt.MaxStreams <= 0 {
		opt.MaxStreams = 16384
	}
	if opt.MaxWaiters <= 0 {
		opt.MaxWaiters = 8192
	}
	if opt.MaxLeases <= 0 {
		opt.MaxLeases = 100000
	}
	if opt.BodyTimeout <= 0 {
		opt.BodyTimeout = 30 * time.Second
	}
	if opt.Heartbeat <= 0 {
		opt.Heartbeat = 15 * time.Second
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Gatherer == nil {
		opt.Gatherer = prometheus.NewRegistry()
	}
	rules, err := loadRules()
	if err != nil {
		panic("api: the embedded openapi.yaml does not load: " + err.Error())
	}
	stopped, stop := context.WithCancelCause(context.Background())
	stopped = context.WithValue(stopped, baseContextKey{}, true)
	base := zookeeper.WithSuspendWait(stopped, opt.SuspendWait, time.Time{})
	s := &Server{opt: opt, log: opt.Logger, metrics: newHTTPMetrics(opt.Registerer), stopped: stopped, base: base, stop: stop,
		streams: make(chan struct{}, opt.MaxStreams), waiters: make(chan struct{}, opt.MaxWaiters),
		following: map[string]func(){}, topics: map[string]func(string, string) func(){}, sectionTokens: map[string]string{}, nested: map[string]func(string, []string) int{}, rules: rules, ticketKey: newTicketKey(), hosts: newHostMatcher(opt.AllowedHosts)}
	draining, drain := context.WithCancelCause(context.Background())
	s.draining = draining
	s.drain = func(cause error) {
		drain(cause)
		s.polls.end(context.Cause(draining)) // the first cause, as draining keeps it
	}
	s.lines = newRequestLines(opt.Logger.Handler())
	s.broker = sse.NewBroker(sse.Options{Registerer: opt.Registerer, OnActive: s.topicActive})
	s.reaper = sse.NewReaper(time.Second)
	s.followSession()
	return s
}

// Close ends every stream and long-poll (they answer as shutting down); one
// opened after it (the listener is closed later: see http.Server.Shutdown) is
// answered the same way at once. It returns once the goroutines serving
// hijacked streams have ended. It does not release leases: the caller closes
// the Leases next.
func (s *Server) Close() { s.closeFor(errShuttingDown) }

// Drain begins a planned upgrade (SIGUSR2): long-polls answer 503 with
// Retry-After as at a shutdown, event streams end with a retry hint (the
// successor serves the client's reconnection), and a lease whose keepalive
// stream ends this way is not revoked: the successor resumes it. Short
// requests are served as usual: the caller stops accepting, lets them finish
// (http.Server.Shutdown), then calls HandOver.
func (s *Server) Drain() { s.drain(errHandingOver) }

// HandOver is Close at the end of a planned upgrade (after Drain).
func (s *Server) HandOver() { s.closeFor(errHandingOver) }

// HandingOver tells whether the server is draining for a hand-over (Drain).
func (s *Server) HandingOver() bool { return errors.Is(context.Cause(s.draining), errHandingOver) }

// RetryHint ends an event stream closed by a hand-over with a retry: field, so
// that the client reconnects (to the successor) at once; otherwise it writes
// nothing.
func (s *Server) RetryHint(sw *sse.Writer) {
	if s.HandingOver() {
		_ = sw.Retry(100 * time.Millisecond)
	}
}

// Heartbeat is the interval of an event stream's keepalive comments
// (Options.Heartbeat).
func (s *Server) Heartbeat() time.Duration { return s.opt.Heartbeat }

func (s *Server) closeFor(cause error) {
	s.drain(cause)
	s.stop(cause)
	s.session.cancel()
	s.broker.Close()
	s.reaper.Close()
	s.hijacked.Close()
	s.lines.close()
}

// Handler returns the whole HTTP surface: the generated /v1 and operations
// routes, served by ops (every operation of openapi.yaml: this Server's own and
// the recipes', composed by api/registry), behind the middleware, plus /metrics
// and /openapi.yaml.
func (s *Server) Handler(ops oapi.StrictServerInterface) http.Handler {
	r := chi.NewRouter()
	r.Use(s.front, headAsGet(r))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeProblem(w, r, NewProblem(http.StatusNotFound, "not-found", "no such route: "+r.Method+" "+r.URL.Path))
	})
	mux := r
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allowOf(mux, r))
		s.writeProblem(w, r, NewProblem(http.StatusMethodNotAllowed, "method-not-allowed", r.Method+" is not allowed on "+r.URL.Path))
	})
	// Every route's own steps (routed), run once chi has matched it (so the
	// route's pattern names the operation, with no second lookup of the
	// path) and before the generated code binds the parameters: the query
	// check, then the slots of streams and long-polls. A request that matches
	// no route (404, 405) meets neither.
	routed := r.With(s.routed)
	routed.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.opt.Gatherer, promhttp.HandlerOpts{}))
	routed.Get("/ui", serveUI)
	routed.Get("/ui/", serveUI)
	routed.Get("/favicon.ico", serveFavicon)
	routed.Get("/docs", serveDocs)
	routed.Get("/docs/", serveDocs)
	routed.Post("/ui/ticket", s.serveTicket)
	routed.Get("/openapi.yaml", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(s.opt.Spec)
	})
	strict := oapi.NewStrictHandlerWithOptions(ops, []oapi.StrictMiddlewareFunc{answerDirect}, oapi.StrictHTTPServerOptions{
		RequestErrorHandlerFunc: func(w http.ResponseWriter, r *http.Request, err error) {
			s.writeProblem(w, r, requestBodyProblem(err))
		},
		ResponseErrorHandlerFunc: s.writeProblem,
	})
	middlewares := []oapi.MiddlewareFunc{s.checkJSONBody}
	bindingError := func(w http.ResponseWriter, r *http.Request, err error) {
		s.writeProblem(w, r, bindingProblem(err))
	}
	oapi.HandlerWithOptions(strict, oapi.ChiServerOptions{
		BaseRouter:       routed,
		Middlewares:      middlewares,
		ErrorHandlerFunc: bindingError,
	})
	// The lock cycle's plain requests are served before the router, by the
	// same steps and the same strict handler (hotparams.go).
	return s.hotFirst(r, ops)
}

// MetricsHandler serves the metrics as /metrics does, without the request
// path's steps (no Host allow-list): for a listener of their own, the
// sidecar's admin listener.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.opt.Gatherer, promhttp.HandlerOpts{})
}

// BaseContext is for http.Server.BaseContext: every connection's context, and so
// every request's, then derives from one that ends when the server closes, at
// the cost of one registration per connection instead of one per request.
func (s *Server) BaseContext(net.Listener) context.Context { return s.base }

type baseContextKey struct{}

// awaitRestored holds /v1 requests until a restart's resume is reconciled
// (Options.Restored); a request whose context ends first answers 503 with
// Retry-After (and false: answered). Everything else (health, metrics, pages)
// is served at once.
func (s *Server) awaitRestored(w http.ResponseWriter, r *http.Request) bool {
	if s.opt.Restored == nil || restored(s.opt.Restored) || !strings.HasPrefix(r.URL.Path, "/v1/") {
		return true
	}
	select {
	case <-s.opt.Restored:
		return true
	case <-r.Context().Done():
		s.writeProblem(w, r, &Problem{Status: http.StatusServiceUnavailable, Name: "zookeeper-unavailable",
			Title: http.StatusText(http.StatusServiceUnavailable), Detail: "resuming the predecessor's ZooKeeper session", RetryAfter: 1})
		return false
	}
}

// shutdownContext makes every request's context end when the server closes, so
// long-polls answer and streams end; the cause is errShuttingDown. A request
// served under BaseContext has that already.
//
// Once the server drains (a hand-over or a shutdown), every answer also says
// `Connection: close`: its connection ends after it, cleanly, so that a client
// sends its next request on a new connection (to the successor) and never on
// one the server is about to close under it.
//
// It returns the request to serve and what to call once it is served (nil:
// nothing).
func (s *Server) shutdownContext(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	select {
	case <-s.draining.Done():
		w.Header().Set("Connection", "close")
	default:
	}
	if r.Context().Value(baseContextKey{}) != nil {
		return r, nil
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	ctx = zookeeper.WithSuspendWait(ctx, s.opt.SuspendWait, time.Time{})
	stop := context.AfterFunc(s.stopped, func() { cancel(errShuttingDown) })
	return r.WithContext(ctx), func() { stop(); cancel(nil) }
}
