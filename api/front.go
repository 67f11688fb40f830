package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// The request path every request shares, fused (issue 41): the steps that
// were eleven middlewares, each wrapping the request in a handler of its own,
// are one handler (front) calling them in the same order, plus one (routed)
// for the steps that need the matched route. Each step is a function that
// returns whether the request goes on; a step with nothing to do for a
// request returns at its first test (a request without a body is not wrapped
// in a body limit, a server without a state directory checks nothing). The
// order, and what each step answers, are those of the chain it replaced:
//
//  1. a panic becomes a 500 problem (outermost: the request line of a panicked
//     request is not written, as before);
//  2. the request's status is recorded for its metrics and its request line
//     (observed, after it is served);
//  3. notAPage's headers on /v1 answers;
//  4. shutdownContext: the request's context ends when the server closes;
//  5. awaitRestored: /v1 waits for a restart's resume;
//  6. guardBrowser: the Host and Origin allow-lists, CORS;
//  7. authenticate, then authorize (auth.go, the two middlewares as they are);
//  8. limitBody, commitState;
//
// then chi matches the route, and routed runs checkQuery (the query held to
// the operation's parameters, and a body refused where the operation takes
// none) and the slots of streams and long-polls (limitConcurrency, which also
// sets how long they wait through a suspension of the ZooKeeper session)
// before the generated code binds the parameters. A Content-Length above
// --max-body is not answered by limitBody: its body fails when read, so that
// the route names the limit that applies (--max-item for a queue item or a
// value).

// front is the shared path (steps 1 to 8) around next, the router.
func (s *Server) front(next http.Handler) http.Handler { return s.frontOf(next, true) }

// frontOf is front; without nests, for requests that name no thing of a
// nested kind (hotFirst's), it skips nestName.
func (s *Server) frontOf(next http.Handler, nests bool) http.Handler {
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.limitBody(w, r) {
			return
		}
		w, ok := s.commitState(w, r)
		if !ok {
			return
		}
		next.ServeHTTP(w, r)
	})
	inner := s.authenticate(s.authorize(served), served)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer s.recoverPanic(w, r)
		if nests {
			s.nestName(r)
		}
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		s.serveFront(rec, r, inner)
		s.observed(rec, r, start)
	})
}

// serveFront is steps 3 to 6, then inner.
func (s *Server) serveFront(w http.ResponseWriter, r *http.Request, inner http.Handler) {
	notAPage(w, r)
	r, done := s.shutdownContext(w, r)
	if done != nil {
		defer done()
	}
	if !s.awaitRestored(w, r) || !s.guardBrowser(w, r) {
		return
	}
	inner.ServeHTTP(w, r)
}

// recoverPanic, deferred, turns a panic into a 500 problem instead of a
// dropped connection.
func (s *Server) recoverPanic(w http.ResponseWriter, r *http.Request) {
	if v := recover(); v != nil {
		if v == http.ErrAbortHandler {
			panic(v)
		}
		s.log.Error("panic in handler", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
		s.writeProblem(w, r, fmt.Errorf("panic: %v", v))
	}
}

// routed is the steps of a matched route: checkQuery, then limitConcurrency.
func (s *Server) routed(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.checkQuery(w, r) {
			s.limitConcurrency(w, r, next)
		}
	})
}

// observed logs one line per request and counts it by route pattern (never by
// the user's names) and status code. No label value comes from what a request
// sends: the route is a pattern of the router's own table, or "unmatched" for
// a path it does not hold (whatever the path) and for a request answered
// before routing (a 401, a 403); the method is a standard one or "other"
// (methodLabel). So the series are bounded by the routes, methods and codes.
func (s *Server) observed(rec *statusRecorder, r *http.Request, start time.Time) {
	route := rec.route
	if route == "" {
		route = "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
	}
	code := rec.status
	if code == 0 {
		code = http.StatusOK
	}
	end := time.Now()
	elapsed := end.Sub(start)
	if rs := rec.obs; rs != nil {
		rs.requests(code).Inc()
		rs.duration().Observe(elapsed.Seconds())
	} else {
		obs := s.metrics.observers(r.Method, route, code)
		obs.requests.Inc()
		obs.duration.Observe(elapsed.Seconds())
	}
	// The handler itself, not the Logger: the Logger would look up its
	// caller's program counter for every line, which no handler here uses.
	if s.lines.h.Enabled(r.Context(), slog.LevelInfo) {
		s.lines.write(&requestLine{end: end, method: r.Method, path: r.URL.Path, route: route,
			remote: r.RemoteAddr, problem: rec.problem, status: code, elapsed: elapsed})
	}
}

// requestLines writes the request lines off the requests' goroutines: a
// request hands its line's fields over (no formatting, no allocation, no
// wake-up of another goroutine but the first line's of a batch) and goes on,
// its answer flushed at once; one goroutine formats and writes the lines in
// the order handed over, a batch at a time, lineBatchDelay after the first
// line of the batch or as soon as half of lineBuffer waits. Once closed (Server.Close: the requests still under way
// finish after it), a line is written on its request's goroutine, after every
// line handed over before. A line is never dropped: when lineBuffer lines
// wait, a request waits for room.
type requestLines struct {
	h       slog.Handler
	mu      sync.Mutex
	room    sync.Cond // signalled when the writer takes a batch
	pending []requestLine
	closed  bool
	kick    chan struct{} // capacity 1: a batch has begun (or the writer is to end)
	hurry   chan struct{} // capacity 1: the batch is half the buffer (or the writer is to end): write it now
	done    chan struct{} // closed when the writer has written every line handed over
}

// requestLine is what observed hands over: the fields of one request line.
type requestLine struct {
	end                                  time.Time
	method, path, route, remote, problem string
	status                               int
	elapsed                              time.Duration
}

// record is the line as the log's handler takes it.
func (l *requestLine) record() slog.Record {
	line := slog.NewRecord(l.end, slog.LevelInfo, "request", 0)
	line.AddAttrs(slog.String("method", l.method),
		slog.String("path", l.path), slog.String("route", l.route), slog.Int("status", l.status),
		slog.String("duration", l.elapsed.String()), slog.String("remote", l.remote))
	if l.problem != "" {
		line.AddAttrs(slog.String("problem", l.problem))
	}
	return line
}

// lineBuffer is how many request lines may wait for the writer.
const lineBuffer = 1024

// lineBatchDelay is how long the writer waits, once a line is handed over,
// for more to write with it: under load one wake-up writes many lines, and a
// line reaches the log (internal/logwriter's batching comes after) at most
// this much later.
const lineBatchDelay = 10 * time.Millisecond

func newRequestLines(h slog.Handler) *requestLines {
	l := &requestLines{h: h, kick: make(chan struct{}, 1), hurry: make(chan struct{}, 1), done: make(chan struct{})}
	l.room.L = &l.mu
	go l.run()
	return l
}

// run is the writer goroutine; it ends once closed and every line handed
// over is written.
func (l *requestLines) run() {
	defer close(l.done)
	var batch []requestLine
	delay := time.NewTimer(lineBatchDelay)
	delay.Stop()
	for {
		<-l.kick
		delay.Reset(lineBatchDelay)
		select {
		case <-delay.C:
		case <-l.hurry:
			delay.Stop()
		}
		l.mu.Lock()
		batch, l.pending = l.pending, batch[:0]
		closed := l.closed
		l.room.Broadcast()
		l.mu.Unlock()
		for i := range batch {
			_ = l.h.Handle(context.Background(), batch[i].record())
		}
		clear(batch) // no request's strings kept alive by the spare buffer
		if closed {
			return
		}
	}
}

// write hands line over to the writer, or writes it once closed.
func (l *requestLines) write(line *requestLine) {
	l.mu.Lock()
	for !l.closed && len(l.pending) >= lineBuffer {
		l.room.Wait()
	}
	if l.closed {
		l.mu.Unlock()
		<-l.done
		_ = l.h.Handle(context.Background(), line.record())
		return
	}
	l.pending = append(l.pending, *line)
	n := len(l.pending)
	l.mu.Unlock()
	switch n {
	case 1:
		signal(l.kick)
	case lineBuffer / 2:
		signal(l.hurry)
	}
}

// signal wakes the writer waiting on c (capacity 1), if it waits.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// close ends the writer once it has written every line handed over, and
// returns then; it may be called more than once.
func (l *requestLines) close() {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		l.room.Broadcast()
		signal(l.kick)
		signal(l.hurry)
	}
	l.mu.Unlock()
	<-l.done
}
