package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// JSON request bodies are held to what openapi.yaml declares of them before the
// generated decoder sees them (it takes any Content-Type, ignores what follows the
// first JSON value, and turns a missing required field into its zero value):
//
//   - a body sent with a Content-Type other than application/json (a charset other
//     than utf-8 included) is 415 unsupported-media-type;
//   - a body with a member its schema does not declare is 400 unknown-parameter
//     (see unknown.go);
//   - a body that is not exactly one JSON value (bad JSON, or more data after it),
//     or that does not match its schema (a required field missing, a wrong type, a
//     value out of range), or a required body that is absent, is 400 invalid-body.
//
// Each is answered before the handler runs, so nothing reaches ZooKeeper. The
// rules are package specrules', read from the embedded spec.

// checkJSONBody is a per-route middleware of the generated router (it runs once
// chi has matched the route, so the route pattern names the operation).
func (s *Server) checkJSONBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.jsonBodyOK(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// jsonBodyOK is checkJSONBody's check: it holds r's body to its operation's
// rule (replacing r.Body with what it read) and reports whether the request
// goes on (false: answered).
func (s *Server) jsonBodyOK(w http.ResponseWriter, r *http.Request) bool {
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return true
	}
	return s.jsonBodyOKOf(w, r, rc.RoutePattern())
}

// jsonBodyOKOf is jsonBodyOK for a request of route (a pattern of the
// router's table).
func (s *Server) jsonBodyOKOf(w http.ResponseWriter, r *http.Request, route string) bool {
	rule, ok := s.rules.Body(r.Method, route)
	if !ok {
		return true
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeProblem(w, r, bodyError(err)) // *http.MaxBytesError: 413
		return false
	}
	if err := rule.Check(r.Header.Get("Content-Type"), body); err != nil {
		s.writeProblem(w, r, err)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// InvalidBody is a 400 invalid-body problem: the request's body is not what
// its operation takes.
func InvalidBody(format string, args ...any) *Problem {
	return NewProblem(http.StatusBadRequest, "invalid-body", fmt.Sprintf(format, args...))
}

// InvalidField is a 400 invalid-body problem about one member of the body
// (carried as parameter).
func InvalidField(field, format string, args ...any) *Problem {
	return withParameter(InvalidBody(format, args...), field)
}

// ReadItem reads a body of at most MaxItem bytes (what: "queue item", "value");
// above it, 413 and nothing kept.
func (s *Server) ReadItem(body io.Reader, what string) ([]byte, error) {
	if body == nil {
		return nil, nil
	}
	data, err := io.ReadAll(io.LimitReader(body, s.opt.MaxItem+1))
	if err != nil && !aboveLimit(err, s.opt.MaxItem) {
		// Above --max-body when that is the lower limit: a 413 too; a body
		// shorter than its Content-Length or too slow: the client's fault, a 4xx.
		return nil, bodyError(err)
	}
	if err != nil || int64(len(data)) > s.opt.MaxItem {
		return nil, NewProblem(http.StatusRequestEntityTooLarge, "body-too-large",
			fmt.Sprintf("a %s is at most %d bytes (--max-item)", what, s.opt.MaxItem))
	}
	return data, nil
}

// aboveLimit tells whether err is a body above a limit higher than limit
// (--max-body above --max-item): the body is above limit too.
func aboveLimit(err error, limit int64) bool {
	var tooLarge *http.MaxBytesError
	return errors.As(err, &tooLarge) && tooLarge.Limit > limit
}
