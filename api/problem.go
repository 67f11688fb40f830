package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/recipes"
)

// ProblemBase prefixes every problem's type URI; the short name follows.
const ProblemBase = "https://coord-sidecar.dev/problems/"

// problem is an RFC 9457 problem document that a handler returns as its error.
type problem struct {
	Status int
	Name   string // short name: the end of the type URI
	Title  string
	Detail string
	Ext    map[string]any // extension members, e.g. "holder"
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (p *problem) Error() string { return p.Name + ": " + p.Detail }

func newProblem(status int, name, detail string) *problem {
	return &problem{Status: status, Name: name, Title: http.StatusText(status), Detail: detail}
}

func invalidParameter(format string, args ...any) *problem {
	return newProblem(http.StatusBadRequest, "invalid-parameter", fmt.Sprintf(format, args...))
}

// problemFor maps any error a handler returns to its problem document: this is the
// one place where errors meet HTTP status codes.
func problemFor(err error) *problem {
	var p *problem
	if errors.As(err, &p) {
		return p
	}
	var locked *recipes.LockedError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &locked):
		p = newProblem(http.StatusConflict, "lock-held", err.Error())
		p.Ext = map[string]any{"holder": lockHolder(locked.Holder)}
	case errors.As(err, &tooLarge):
		p = newProblem(http.StatusRequestEntityTooLarge, "body-too-large",
			fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit))
	case errors.Is(err, recipes.ErrInvalidName):
		p = newProblem(http.StatusBadRequest, "invalid-name",
			err.Error()+": names match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
	case errors.Is(err, recipes.ErrInvalidArgument):
		p = newProblem(http.StatusBadRequest, "invalid-parameter", err.Error())
	case errors.Is(err, recipes.ErrLeaseNotFound), errors.Is(err, recipes.ErrLeaseEnded):
		p = newProblem(http.StatusNotFound, "lease-not-found", err.Error())
	case errors.Is(err, recipes.ErrNotHeld):
		p = newProblem(http.StatusNotFound, "not-held", err.Error())
	case errors.Is(err, recipes.ErrMemberExists):
		p = newProblem(http.StatusConflict, "member-exists", err.Error())
	case errors.Is(err, recipes.ErrMemberNotFound):
		p = newProblem(http.StatusNotFound, "member-not-found", err.Error())
	case errors.Is(err, errTooManyLeases):
		p = newProblem(http.StatusTooManyRequests, "too-many-leases", err.Error())
		p.RetryAfter = 1
	case errors.Is(err, recipes.ErrClaimNotFound):
		p = newProblem(http.StatusNotFound, "claim-not-found", err.Error())
	case errors.Is(err, recipes.ErrCandidateExists):
		p = newProblem(http.StatusConflict, "candidate-exists", err.Error())
	case errors.Is(err, recipes.ErrBusy):
		p = newProblem(http.StatusConflict, "acquisition-in-progress", err.Error())
	case errors.Is(err, recipes.ErrSessionLost):
		p = newProblem(http.StatusServiceUnavailable, "session-lost",
			"the ZooKeeper session expired: every grant made under it is gone ("+err.Error()+")")
		p.RetryAfter = 1
	case errors.Is(err, recipes.ErrUnavailable):
		p = newProblem(http.StatusServiceUnavailable, "zookeeper-unavailable", err.Error())
		p.RetryAfter = 1
	case errors.Is(err, recipes.ErrClosed), errors.Is(err, errShuttingDown):
		p = newProblem(http.StatusServiceUnavailable, "shutting-down", "the sidecar is shutting down")
		p.RetryAfter = 1
	case errors.Is(err, errNotImplemented):
		p = newProblem(http.StatusNotImplemented, "not-implemented", err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		p = newProblem(http.StatusServiceUnavailable, "cancelled", err.Error())
	default:
		p = newProblem(http.StatusInternalServerError, "internal", "internal error")
	}
	return p
}

var (
	errTooManyLeases  = errors.New("too many leases")
	errShuttingDown   = errors.New("shutting down")
	errNotImplemented = errors.New("not implemented yet")
)

// StatusClientClosedRequest is the status a request gets (in metrics and logs)
// when its client went away before the answer, as nginx counts it.
const StatusClientClosedRequest = 499

// writeProblem writes err as an application/problem+json document. A request
// whose client went away (its context ended, not by a shutdown) and that would
// otherwise answer a 5xx (a wait cut short looks like ZooKeeper being
// unavailable) is answered 499 client-closed-request: the client's doing, not
// the sidecar's or ZooKeeper's. A 4xx stays what it is.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
	if ctx := r.Context(); p.Status >= 500 && ctx.Err() != nil && !errors.Is(context.Cause(ctx), errShuttingDown) {
		p = &problem{Status: StatusClientClosedRequest, Name: "client-closed-request",
			Title: "Client Closed Request", Detail: "the client went away before the answer"}
	}
	if rec := recorderOf(w); rec != nil {
		rec.problem = p.Name
	}
	if p.Status >= 500 && p.Name == "internal" {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	body := map[string]any{}
	for k, v := range p.Ext {
		body[k] = v
	}
	body["type"] = ProblemBase + p.Name
	body["title"] = p.Title
	body["status"] = p.Status
	if p.Detail != "" {
		body["detail"] = p.Detail
	}
	body["instance"] = r.URL.Path
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(p.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}
