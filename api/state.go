package api

import (
	"context"
	"net/http"
	"strings"
)

// StateDir is the state directory's side of a request (--state-dir): a 2xx
// is a promise, so what an answer grants, releases or revokes is written
// there before the answer leaves.
type StateDir interface {
	// Commit returns once every change made before the call is written, or
	// the write's error.
	Commit(ctx context.Context) error
	// StateErr is the last write's error, nil while writes succeed.
	StateErr() error
}

// stateUnavailable is the problem of a request refused because the state
// directory cannot be written.
func stateUnavailable(err error) *Problem {
	return &Problem{Status: http.StatusServiceUnavailable, Name: "state-unavailable",
		Title: http.StatusText(http.StatusServiceUnavailable), RetryAfter: 1,
		Detail: "the state directory cannot be written, so nothing can be granted, released or revoked that a restart would keep: " + err.Error()}
}

// changesState tells whether r is a /v1 request that may change what a
// successor must keep: every method but GET and HEAD (reads and streams).
func changesState(r *http.Request) bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead && strings.HasPrefix(r.URL.Path, "/v1/")
}

// commitState makes a 2xx a promise (Options.State): a request that may
// change state is refused at once, touching nothing, while the last state
// write failed; otherwise its success answer waits until what it changed is
// written (a group commit with the concurrent requests', see
// statedir.Journal), and when that write fails it answers 503
// state-unavailable instead. What such a request did in ZooKeeper then stays
// unacknowledged: an implicit lease it made ends with its TTL.
//
// It returns the writer to serve the request with, and false when it answered.
func (s *Server) commitState(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, bool) {
	if s.opt.State == nil || !changesState(r) {
		return w, true
	}
	if err := s.opt.State.StateErr(); err != nil {
		s.writeProblem(w, r, stateUnavailable(err))
		return w, false
	}
	return &committingWriter{ResponseWriter: w, s: s, r: r}, true
}

// committingWriter holds a success answer's header until the state is
// written; when the write fails it answers the problem instead and drops
// what the handler writes after.
type committingWriter struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	decided bool
	refused bool
}

func (c *committingWriter) WriteHeader(code int) {
	if c.decided {
		if !c.refused {
			c.ResponseWriter.WriteHeader(code)
		}
		return
	}
	c.decided = true
	if code >= 200 && code < 300 {
		if err := c.s.opt.State.Commit(c.r.Context()); err != nil {
			c.refused = true
			h := c.Header()
			for k := range h {
				delete(h, k)
			}
			c.s.writeProblem(c.ResponseWriter, c.r, stateUnavailable(err))
			return
		}
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *committingWriter) Write(b []byte) (int, error) {
	if !c.decided {
		c.WriteHeader(http.StatusOK)
	}
	if c.refused {
		return len(b), nil
	}
	return c.ResponseWriter.Write(b)
}

func (c *committingWriter) Flush() {
	if c.refused {
		return
	}
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (c *committingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
