package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/coord-sidecar/coord-sidecar/api/tokens"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
)

// limitBody caps a request's body at --max-body. A body whose Content-Length
// is above it is not read at all: reading it fails at once (tooLarge), and the
// matched route answers (a 413 naming the limit that applies, or a 400 where no
// body belongs). A body must arrive within BodyTimeout of the headers: its reads get a deadline,
// lifted once it is read to its end, so that the wait of a long-poll that sent a
// body is not cut. A request without a body (every stream) gets none.
//
// A request without a body (http.NoBody) keeps it as it is: there is nothing
// to cap or to wait for. It reports whether the request goes on (false:
// answered).
func (s *Server) limitBody(w http.ResponseWriter, r *http.Request) bool {
	if r.ContentLength > s.opt.MaxBody {
		// Refused by its route, unread: a JSON body with 413 (--max-body), a
		// queue item or a value with the --max-item it exceeds too (ReadItem),
		// a body where none belongs with 400 (checkQuery).
		r.Body = tooLarge{s.opt.MaxBody}
		return true
	}
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	if r.ContentLength != 0 {
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(s.opt.BodyTimeout)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.opt.MaxBody)
	return true
}

// deadlineBody lifts the connection's read deadline once the body is read to its
// end. A body that failed (too slow, cut short) keeps it, so that net/http's
// attempt to discard the rest before answering fails at once too.
type deadlineBody struct {
	io.ReadCloser
	lift   func()
	lifted bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.lifted {
		b.lifted = true
		b.lift()
	}
	return n, err
}

// limitConcurrency bounds what holds a goroutine and a connection for long:
// event streams (paths ending in /events) and long-polls (a non-zero wait=).
// Past the global bound, or past its token's share of it
// (tokens.Principal.Share), a request answers 503 with Retry-After at once; the
// token's slot is released with the global one.
//
// It serves the request with next, under its slot when it takes one. The
// slot's context also sets how long the request waits through a suspension of
// the ZooKeeper session (zookeeper.WithSuspendWait): every request's context
// allows Options.SuspendWait already (BaseContext, shutdownContext); a /v1
// long-poll whose wait= is longer (up to --max-wait) may wait until its wait
// ends, and a /v1 event stream waits for nothing (its state tells of the
// suspension instead). Set here, with the slot, the request is copied once for
// both, and wait= read once; nothing before the route waits on ZooKeeper.
func (s *Server) limitConcurrency(w http.ResponseWriter, r *http.Request, next http.Handler) {
	var wait string
	if !strings.HasSuffix(r.URL.Path, "/events") {
		wait = queryValue(r.URL.RawQuery, "wait")
	}
	c, ok := s.takeSlot(w, r, wait)
	if !ok {
		return
	}
	if c == nil {
		next.ServeHTTP(w, r)
		return
	}
	defer s.endSlot(c)
	next.ServeHTTP(w, r.WithContext(c))
}

// takeSlot is limitConcurrency's slot for r, whose wait= is wait (as sent,
// "" when not given): nil and true when r needs none (not a stream, not a
// long-poll), nil and false when it is refused (answered: 503), else the
// context to serve r with, until endSlot.
func (s *Server) takeSlot(w http.ResponseWriter, r *http.Request, wait string) (*pollCtx, bool) {
	var sem chan struct{}
	var res int
	ctx := r.Context()
	v1 := strings.HasPrefix(r.URL.Path, "/v1/")
	if strings.HasSuffix(r.URL.Path, "/events") {
		sem, res = s.streams, tokens.Streams
		if v1 { // an event stream waits for nothing
			ctx = zookeeper.WithSuspendWait(ctx, 0, time.Time{})
		}
	} else {
		var d time.Duration
		var err error
		if wait != "" {
			d, err = time.ParseDuration(wait)
		}
		if err != nil || d <= 0 {
			return nil, true
		}
		sem, res = s.waiters, tokens.Waiters
		if v1 && d > s.opt.SuspendWait && d <= s.opt.MaxWait {
			ctx = zookeeper.WithSuspendWait(ctx, s.opt.SuspendWait, time.Now().Add(d))
		}
	}
	p := tokens.FromContext(r.Context())
	own, capped := p.Share(res, cap(sem))
	c := &pollCtx{}
	ok, ownFull := s.held.take(p.Name(), res, own, capped, sem, &c.slot)
	if !ok {
		s.metrics.refused(res, ownFull)
		detail := fmt.Sprintf("this sidecar already serves %d %s", cap(sem), shareNames[res])
		if ownFull {
			detail = fmt.Sprintf("token %q already holds %d %s, its own cap (%s)", p.Name(), own, shareNames[res], tokens.ShareFields[res])
		}
		pr := NewProblem(http.StatusServiceUnavailable, "too-many-"+shareNames[res], detail)
		pr.RetryAfter = 1
		s.writeProblem(w, r, pr)
		return nil, false
	}
	c.Context, c.cancel = context.WithCancelCause(ctx)
	s.polls.add(c) // a hand-over ends streams and long-polls first
	return c, true
}

// endSlot ends what takeSlot began, once the request is served: the slot is
// given back unless a stream took it with it (detachSlot).
func (s *Server) endSlot(c *pollCtx) {
	if !c.slot.detached {
		c.slot.release()
	}
	s.polls.remove(c)
}

// pollCtx is the context of a stream or long-poll under its slot: the
// request's, ended also when the server drains (with the drain's cause), and
// carrying the slot (detachSlot). One allocation for what were a cancel
// context's registration with the drain (context.AfterFunc), a value context
// and their closures.
type pollCtx struct {
	context.Context // the request's, cancelable
	cancel          context.CancelCauseFunc
	slot            slot
	prev, next      *pollCtx // in pollSet, while served
}

func (c *pollCtx) Value(key any) any {
	if key == (slotKey{}) {
		return &c.slot
	}
	return c.Context.Value(key)
}

// pollSet holds the streams and long-polls under way, so that a drain ends
// them: one list under a mutex, no allocation per entry.
type pollSet struct {
	mu    sync.Mutex
	head  *pollCtx
	ended error // the drain's cause, once drained
}

// add puts c in the set, or ends it at once when the server has drained.
func (ps *pollSet) add(c *pollCtx) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.ended != nil {
		c.cancel(ps.ended)
		return
	}
	c.next = ps.head
	if ps.head != nil {
		ps.head.prev = c
	}
	ps.head = c
}

// remove takes c out of the set and releases its context.
func (ps *pollSet) remove(c *pollCtx) {
	ps.mu.Lock()
	if c.prev != nil {
		c.prev.next = c.next
	} else if ps.head == c {
		ps.head = c.next
	}
	if c.next != nil {
		c.next.prev = c.prev
	}
	c.prev, c.next = nil, nil
	ps.mu.Unlock()
	c.cancel(nil)
}

// end ends every stream and long-poll under way, and every one added after,
// with cause (the first cause given stays).
func (ps *pollSet) end(cause error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.ended != nil {
		return
	}
	ps.ended = cause
	for c := ps.head; c != nil; c = c.next {
		c.cancel(cause)
	}
}

// shareNames name the shares in problems and metrics.
var shareNames = [tokens.NumShares]string{"leases", "streams", "long-polls"}

// tokenHolds counts the streams and long-polls each token holds, for the
// tokens whose own cap applies; a token holding none has no entry, so the map
// is bounded by the tokens in use.
type tokenHolds struct {
	mu   sync.Mutex
	held map[string]*[tokens.NumShares]int
}

// take takes a slot of sem (without waiting) and, when capped, one of the
// token's own own slots of res, as one step, into sl (sl.release gives both
// back). It reports whether it took them, or whether it was the token's own
// cap that was full.
func (h *tokenHolds) take(token string, res, own int, capped bool, sem chan struct{}, sl *slot) (ok, ownFull bool) {
	if !capped {
		select {
		case sem <- struct{}{}:
			sl.sem = sem
			return true, false
		default:
			return false, false
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.held[token]
	if n != nil && n[res] >= own {
		return false, true
	}
	select {
	case sem <- struct{}{}:
	default:
		return false, false
	}
	if n == nil {
		if h.held == nil {
			h.held = map[string]*[tokens.NumShares]int{}
		}
		n = &[tokens.NumShares]int{}
		h.held[token] = n
	}
	n[res]++
	*sl = slot{sem: sem, holds: h, token: token, res: res}
	return true, false
}

// give returns one of the token's slots of res.
func (h *tokenHolds) give(token string, res int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.held[token]
	if n[res]--; *n == [tokens.NumShares]int{} {
		delete(h.held, token)
	}
}

// slot is a request's place under a concurrency cap: sem's, and when its token
// is capped (holds not nil) one of the token's own of res. A stream that
// outlives its handler (a hijacked stream) detaches it and releases it when it
// ends.
type slot struct {
	sem      chan struct{}
	holds    *tokenHolds
	token    string
	res      int
	detached bool
}

// release gives the slot back.
func (sl *slot) release() {
	if sl.holds != nil {
		sl.holds.give(sl.token, sl.res)
	}
	<-sl.sem
}

type slotKey struct{}

// detachSlot takes the request's slot over from the middleware and returns its
// release function (a no-op for a request that holds none).
func detachSlot(ctx context.Context) func() {
	sl, ok := ctx.Value(slotKey{}).(*slot)
	if !ok {
		return func() {}
	}
	sl.detached = true
	var once sync.Once
	return func() { once.Do(sl.release) }
}

// queryValue is url.ParseQuery(raw).Get(key) without parsing the whole query
// into a map: the first value of key, "" when there is none (a pair that does
// not decode is skipped, as ParseQuery skips it).
func queryValue(raw, key string) string {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if strings.Contains(pair, ";") {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				continue
			}
		}
		if k != key {
			continue
		}
		if v, err := url.QueryUnescape(v); err == nil {
			return v
		}
	}
	return ""
}

// bodyError keeps a body-size error recognisable, makes a body that did not
// arrive in time a 408 body-timeout and any other reading or decoding error (a
// body shorter than its Content-Length, malformed JSON) a 400 invalid-body: the
// client's fault, never a 5xx.
func bodyError(err error) error {
	var tooLarge *http.MaxBytesError
	var p *Problem
	switch {
	case errors.As(err, &tooLarge), errors.As(err, &p):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return NewProblem(http.StatusRequestTimeout, "body-timeout", "the request body did not arrive in time")
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return NewProblem(http.StatusBadRequest, "invalid-body", "the request body ended before its Content-Length")
	}
	return NewProblem(http.StatusBadRequest, "invalid-body", "the request body could not be read")
}

// requestBodyProblem is the problem of a body the generated wrapper could not
// decode: checkJSONBody holds a JSON body to its schema first, so this is a
// read failure, or else said in the user's words, not the decoder's.
func requestBodyProblem(err error) error {
	var tooLarge *http.MaxBytesError
	var p *Problem
	if errors.As(err, &tooLarge) || errors.As(err, &p) || errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) {
		return bodyError(err)
	}
	return InvalidBody("the body does not match the operation's schema (see GET /docs/)")
}

// tooLarge is the body of a request whose Content-Length is above --max-body:
// reading it fails at once.
type tooLarge struct{ limit int64 }

func (b tooLarge) Read([]byte) (int, error) { return 0, &http.MaxBytesError{Limit: b.limit} }
func (tooLarge) Close() error               { return nil }

// statusRecorder remembers the status code; Unwrap keeps http.ResponseController
// (flushes and write deadlines for streams) working through it.
type statusRecorder struct {
	http.ResponseWriter
	status  int
	problem string       // the short name of the problem answered, if any
	route   string       // the route's pattern when served before the router (hotFirst), else ""
	obs     *routeSeries // that route's series (with route), else nil
}

// recorderOf finds the request's statusRecorder under w's wrappers, or nil.
func recorderOf(w http.ResponseWriter) *statusRecorder {
	for {
		if rec, ok := w.(*statusRecorder); ok {
			return rec
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	// refusals counts requests refused past a cap, by resource and by whose
	// cap it was ("global" or "token").
	refusals *prometheus.CounterVec
	// cache holds the series of each route and code seen (routeKey →
	// *routeObservers): a request then costs no label hashing or vector lock.
	cache *sync.Map
}

type routeKey struct {
	method, route string
	code          int
}

type routeObservers struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// observers returns the series of one route and status code; a method
// outside the standard ones shares the series of "other".
func (m httpMetrics) observers(method, route string, code int) *routeObservers {
	method = methodLabel(method)
	k := routeKey{method, route, code}
	if o, ok := m.cache.Load(k); ok {
		return o.(*routeObservers)
	}
	label := method + " " + route
	o := &routeObservers{
		requests: m.requests.WithLabelValues(label, strconv.Itoa(code)),
		duration: m.duration.WithLabelValues(label),
	}
	actual, _ := m.cache.LoadOrStore(k, o)
	return actual.(*routeObservers)
}

// routeSeries is the series of one method and route pattern, resolved once
// (Server.hotFirst's routes): the duration, and the request counter of each
// status code, each made at its first use (as observers makes them: no
// series before a request) and then read with one atomic load, no label
// hashing and no map. They are the series observers returns for the same
// method, route and code.
type routeSeries struct {
	m      httpMetrics
	label  string // the route label: method, space, pattern
	dur    atomic.Pointer[prometheus.Observer]
	byCode [500]atomic.Pointer[prometheus.Counter] // status codes 100 to 599
}

func (m httpMetrics) routeSeries(method, route string) *routeSeries {
	return &routeSeries{m: m, label: methodLabel(method) + " " + route}
}

// duration is the route's duration histogram.
func (rs *routeSeries) duration() prometheus.Observer {
	if o := rs.dur.Load(); o != nil {
		return *o
	}
	o := rs.m.duration.WithLabelValues(rs.label)
	rs.dur.Store(&o)
	return o
}

// requests is the request counter of code.
func (rs *routeSeries) requests(code int) prometheus.Counter {
	if code < 100 || code > 599 {
		return rs.m.requests.WithLabelValues(rs.label, strconv.Itoa(code))
	}
	p := &rs.byCode[code-100]
	if c := p.Load(); c != nil {
		return *c
	}
	c := rs.m.requests.WithLabelValues(rs.label, strconv.Itoa(code))
	p.Store(&c)
	return c
}

func newHTTPMetrics(reg prometheus.Registerer) httpMetrics {
	f := promauto.With(reg)
	m := httpMetrics{
		requests: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_http_requests_total",
			Help: "HTTP requests by route pattern (method and path template) and status code.",
		}, []string{"route", "code"}),
		duration: f.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "coord_http_request_duration_seconds",
			Help:    "HTTP request duration by route pattern, long-polls and streams included.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"route"}),
		refusals: f.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_limit_refusals_total",
			Help: "Requests refused past a cap: resource (leases, streams, long-polls) and cap (global, or the token's own).",
		}, []string{"resource", "cap"}),
		cache: &sync.Map{},
	}
	for _, res := range shareNames {
		for _, c := range []string{"global", "token"} {
			m.refusals.WithLabelValues(res, c)
		}
	}
	return m
}

// refused counts a refusal past the cap of res: the token's own, or the global one.
func (m httpMetrics) refused(res int, own bool) {
	c := "global"
	if own {
		c = "token"
	}
	m.refusals.WithLabelValues(shareNames[res], c).Inc()
}

// methodLabel is a request method as the metrics name it: one of the standard
// methods (RFC 9110's and PATCH) as sent, any other, a made-up one of any
// length or a lower-case one, "other". net/http takes any token as a method,
// and chi answers an unknown one 405, so without this each made-up method
// would be a new series (300 requests with 8,000-byte methods grew /metrics
// from 130 KB to 34 MB).
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}
