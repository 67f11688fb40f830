package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api/specrules"
	"github.com/coord-sidecar/coord-sidecar/recipes/barrier"
	"github.com/coord-sidecar/coord-sidecar/recipes/counter"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kv"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
	"github.com/coord-sidecar/coord-sidecar/recipes/partition"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
	"github.com/coord-sidecar/coord-sidecar/recipes/rwlock"
	"github.com/coord-sidecar/coord-sidecar/recipes/semaphore"
	"github.com/coord-sidecar/coord-sidecar/recipes/throughput"
)

// ProblemBase prefixes every problem's type URI; the short name follows.
const ProblemBase = "https://coord-sidecar.dev/problems/"

// Problem is an RFC 9457 problem document that a handler returns as its error.
type Problem struct {
	Status int
	Name   string // short name: the end of the type URI
	Title  string
	Detail string
	Ext    map[string]any // extension members, e.g. "holder"
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (p *Problem) Error() string { return p.Name + ": " + p.Detail }

func NewProblem(status int, name, detail string) *Problem {
	return &Problem{Status: status, Name: name, Title: http.StatusText(status), Detail: detail}
}

func InvalidParameter(format string, args ...any) *Problem {
	return NewProblem(http.StatusBadRequest, "invalid-parameter", fmt.Sprintf(format, args...))
}

// problemFor maps any error a handler returns to its problem document: this is the
// one place where errors meet HTTP status codes.
func problemFor(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	if p := specProblem(err); p != nil {
		return p
	}
	if p := detailedProblem(err); p != nil {
		return p
	}
	for _, k := range plainProblems {
		if errors.Is(err, k.err) {
			detail := err.Error()
			if k.detail != nil {
				detail = k.detail(err)
			}
			p = NewProblem(k.status, k.name, detail)
			if k.status == http.StatusServiceUnavailable || k.status == http.StatusTooManyRequests {
				p.RetryAfter = 1
			}
			return p
		}
	}
	return NewProblem(http.StatusInternalServerError, "internal", "internal error")
}

// plainProblems map sentinel errors to problems, first match first; the detail
// is the error's text unless detail says otherwise. A 503 or a 429 comes with
// Retry-After.
var plainProblems = []struct {
	err    error
	status int
	name   string
	detail func(error) string
}{
	{barrier.ErrBarrierRaised, http.StatusConflict, "barrier-raised", nil},
	{barrier.ErrParticipantExists, http.StatusConflict, "participant-exists", nil},
	{queue.ErrClaimNotFound, http.StatusNotFound, "claim-not-found", nil},
	{kit.ErrInvalidName, http.StatusBadRequest, "invalid-name", func(err error) string {
		return err.Error() + ": names match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
	}},
	{kit.ErrInvalidArgument, http.StatusBadRequest, "invalid-parameter", nil},
	{kit.ErrLeaseNotFound, http.StatusNotFound, "lease-not-found", nil},
	{kit.ErrLeaseEnded, http.StatusNotFound, "lease-not-found", nil},
	{kit.ErrNotHeld, http.StatusNotFound, "not-held", nil},
	{kv.ErrKeyNotFound, http.StatusNotFound, "key-not-found", nil},
	{counter.ErrCorrupt, http.StatusConflict, "counter-corrupt", nil},
	{counter.ErrNotFound, http.StatusNotFound, "counter-not-found", nil},
	{throughput.ErrMemberExists, http.StatusConflict, "member-exists", nil},
	{throughput.ErrMemberNotFound, http.StatusNotFound, "member-not-found", nil},
	{group.ErrMemberExists, http.StatusConflict, "member-exists", nil},
	{group.ErrMemberNotFound, http.StatusNotFound, "member-not-found", nil},
	{partition.ErrMemberExists, http.StatusConflict, "member-exists", nil},
	{partition.ErrMemberNotFound, http.StatusNotFound, "member-not-found", nil},
	{errTooManyLeases, http.StatusTooManyRequests, "too-many-leases", nil},
	{election.ErrCandidateExists, http.StatusConflict, "candidate-exists", nil},
	{kit.ErrBusy, http.StatusConflict, "acquisition-in-progress", nil},
	{kit.ErrForbiddenByACL, http.StatusForbidden, "zookeeper-acl", func(err error) string {
		return "a ZooKeeper ACL refuses the sidecar this operation (" + err.Error() + ")"
	}},
	{kit.ErrSessionLost, http.StatusServiceUnavailable, "session-lost", func(err error) string {
		return "the ZooKeeper session expired: every grant made under it is gone (" + err.Error() + ")"
	}},
	{kit.ErrUnavailable, http.StatusServiceUnavailable, "zookeeper-unavailable", nil},
	{kit.ErrClosed, http.StatusServiceUnavailable, "shutting-down", shuttingDown},
	{errShuttingDown, http.StatusServiceUnavailable, "shutting-down", shuttingDown},
	{context.Canceled, http.StatusServiceUnavailable, "cancelled", nil},
	{context.DeadlineExceeded, http.StatusServiceUnavailable, "cancelled", nil},
}

func shuttingDown(error) string { return "the sidecar is shutting down" }

// specProblem is the problem of a request package specrules refused, or nil.
func specProblem(err error) *Problem {
	var unknown *specrules.Unknown
	var refused *specrules.Refused
	switch {
	case errors.As(err, &unknown):
		return unknownParameter(unknown)
	case !errors.As(err, &refused):
		return nil
	case refused.Why == specrules.BadMediaType:
		return NewProblem(http.StatusUnsupportedMediaType, "unsupported-media-type", refused.Detail)
	case refused.Why == specrules.BadQuery:
		return InvalidParameter("%s", refused.Detail)
	default:
		return InvalidBody("%s", refused.Detail)
	}
}

// detailedProblem maps the errors that carry state for the problem's extension
// members; nil for any other.
func detailedProblem(err error) *Problem {
	var locked *lock.LockedError
	var notReady *barrier.BarrierNotReadyError
	var notEmpty *barrier.BarrierNotEmptyError
	var mismatch *barrier.CountMismatchError
	var tooLarge *http.MaxBytesError
	var versionMismatch *kv.VersionMismatchError
	var valueMismatch *counter.MismatchError
	var overflow *counter.OverflowError
	var full *semaphore.SemaphoreFullError
	var maxMismatch *semaphore.MaxMismatchError
	var rwLocked *rwlock.RWLockedError
	var partitionMismatch *partition.VersionMismatchError
	var p *Problem
	switch {
	case errors.As(err, &versionMismatch):
		p = NewProblem(http.StatusConflict, "version-mismatch", err.Error())
		p.Ext = map[string]any{"version": versionMismatch.Version}
	case errors.As(err, &valueMismatch):
		p = NewProblem(http.StatusConflict, "value-mismatch", err.Error())
		p.Ext = map[string]any{"value": valueMismatch.Value}
	case errors.As(err, &overflow):
		p = NewProblem(http.StatusConflict, "counter-overflow", err.Error()+"; nothing was added")
		p.Ext = map[string]any{"value": overflow.Value}
	case errors.As(err, &full):
		p = NewProblem(http.StatusConflict, "semaphore-full", err.Error())
		p.Ext = map[string]any{"holders": SemaphoreHolders(full.Holders)}
	case errors.As(err, &maxMismatch):
		p = NewProblem(http.StatusConflict, "max-mismatch",
			err.Error()+"; acquire with that max, or wait until the semaphore's holders have all left")
		p.Ext = map[string]any{"max": maxMismatch.Max}
	case errors.As(err, &rwLocked):
		p = NewProblem(http.StatusConflict, "lock-held", err.Error())
		p.Ext = map[string]any{"writer": LockHolder(rwLocked.Writer), "readers": RWReaders(rwLocked.Readers)}
	case errors.As(err, &locked):
		p = NewProblem(http.StatusConflict, "lock-held", err.Error())
		p.Ext = map[string]any{"holder": LockHolder(locked.Holder)}
	case errors.As(err, &notReady):
		p = NewProblem(http.StatusConflict, "barrier-not-ready",
			err.Error()+"; the participant stays enrolled: enter again to go on waiting")
		p.Ext = map[string]any{"count": notReady.Count, "participants": notReady.Participants, "lease": notReady.Lease}
	case errors.As(err, &notEmpty):
		p = NewProblem(http.StatusConflict, "barrier-not-empty", err.Error()+"; this participant has left")
		p.Ext = map[string]any{"remaining": notEmpty.Remaining}
	case errors.As(err, &mismatch):
		p = NewProblem(http.StatusConflict, "count-mismatch",
			err.Error()+"; enter with that count, or wait until the barrier empties")
		p.Ext = map[string]any{"count": mismatch.Count}
	case errors.As(err, &partitionMismatch):
		p = NewProblem(http.StatusConflict, "version-mismatch", err.Error())
		p.Ext = map[string]any{"version": partitionMismatch.Current}
	case errors.As(err, &tooLarge):
		p = NewProblem(http.StatusRequestEntityTooLarge, "body-too-large",
			fmt.Sprintf("the request body is larger than %d bytes", tooLarge.Limit))
	}
	return p
}

var (
	errTooManyLeases = errors.New("too many leases")
	errShuttingDown  = errors.New("shutting down")
	// errHandingOver is the shutdown of a planned upgrade (Server.HandOver):
	// the successor serves next, so streams end with a retry hint and leases
	// bound to a stream are not revoked.
	errHandingOver = fmt.Errorf("%w: handing over to its successor", errShuttingDown)
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
		p = &Problem{Status: StatusClientClosedRequest, Name: "client-closed-request",
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
