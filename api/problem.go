package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
	"github.com/coord-sidecar/coord-sidecar/recipes/throughput"
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
	var notReady *recipes.BarrierNotReadyError
	var notEmpty *recipes.BarrierNotEmptyError
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, recipes.ErrBarrierRaised):
		p = newProblem(http.StatusConflict, "barrier-raised", err.Error())
	case errors.As(err, &notReady):
		p = newProblem(http.StatusConflict, "barrier-not-ready",
			err.Error()+"; the participant stays enrolled: enter again to go on waiting")
		p.Ext = map[string]any{"count": notReady.Count, "participants": notReady.Participants, "lease": notReady.Lease}
	case errors.As(err, &notEmpty):
		p = newProblem(http.StatusConflict, "barrier-not-empty", err.Error()+"; this participant has left")
		p.Ext = map[string]any{"remaining": notEmpty.Remaining}
	case errors.Is(err, recipes.ErrParticipantExists):
		p = newProblem(http.StatusConflict, "participant-exists", err.Error())
	case errors.Is(err, queue.ErrClaimNotFound):
		p = newProblem(http.StatusNotFound, "claim-not-found", err.Error())
	case errors.As(err, &locked):
		p = newProblem(http.StatusConflict, "lock-held", err.Error())
		p.Ext = map[string]any{"holder": lockHolder(locked.Holder)}
	case errors.As(err, &tooLarge):
		p = newProblem(http.StatusRequestEntityTooLarge, "body-too-large",
			fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit))
	case errors.Is(err, kit.ErrInvalidName):
		p = newProblem(http.StatusBadRequest, "invalid-name",
			err.Error()+": names match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
	case errors.Is(err, kit.ErrInvalidArgument):
		p = newProblem(http.StatusBadRequest, "invalid-parameter", err.Error())
	case errors.Is(err, kit.ErrLeaseNotFound), errors.Is(err, kit.ErrLeaseEnded):
		p = newProblem(http.StatusNotFound, "lease-not-found", err.Error())
	case errors.Is(err, kit.ErrNotHeld):
		p = newProblem(http.StatusNotFound, "not-held", err.Error())
	case errors.Is(err, throughput.ErrMemberExists):
		p = newProblem(http.StatusConflict, "member-exists", err.Error())
	case errors.Is(err, throughput.ErrMemberNotFound):
		p = newProblem(http.StatusNotFound, "member-not-found", err.Error())
	case errors.Is(err, recipes.ErrCandidateExists):
		p = newProblem(http.StatusConflict, "candidate-exists", err.Error())
	case errors.Is(err, kit.ErrBusy):
		p = newProblem(http.StatusConflict, "acquisition-in-progress", err.Error())
	case errors.Is(err, kit.ErrSessionLost):
		p = newProblem(http.StatusServiceUnavailable, "session-lost",
			"the ZooKeeper session expired: every grant made under it is gone ("+err.Error()+")")
		p.RetryAfter = 1
	case errors.Is(err, kit.ErrUnavailable):
		p = newProblem(http.StatusServiceUnavailable, "zookeeper-unavailable", err.Error())
		p.RetryAfter = 1
	case errors.Is(err, kit.ErrClosed), errors.Is(err, errShuttingDown):
		p = newProblem(http.StatusServiceUnavailable, "shutting-down", "the sidecar is shutting down")
		p.RetryAfter = 1
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		p = newProblem(http.StatusServiceUnavailable, "cancelled", err.Error())
	default:
		p = newProblem(http.StatusInternalServerError, "internal", "internal error")
	}
	return p
}

var errShuttingDown = errors.New("shutting down")

// writeProblem writes err as an application/problem+json document.
func (s *Server) writeProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := problemFor(err)
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
