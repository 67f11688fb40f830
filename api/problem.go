package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/coord-sidecar/coord-sidecar/api/specrules"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
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

// NewProblem is the problem document of status (its title the status's text),
// named name, with detail.
func NewProblem(status int, name, detail string) *Problem {
	return &Problem{Status: status, Name: name, Title: http.StatusText(status), Detail: detail}
}

// Where problems are made. Every problem document the sidecar answers comes
// from one of three places, and docs/PROBLEMS.md lists them all (the test
// TestEveryProblemTypeIsDocumented reads them from the code):
//   - an error a handler returns that every recipe may return (recipes/kit's,
//     this package's own) meets its status in sharedProblems, below;
//   - an error of one recipe's own meets its status in that recipe's
//     descriptor (Descriptor.Problems, made with ProblemIs and ProblemAs, in
//     its folder under api/);
//   - a request refused before any recipe is asked (a bad body or parameter,
//     a token, a host or an origin refused, a route that does not exist, a
//     share used up) is answered with a *Problem made on the spot with
//     NewProblem, InvalidParameter or InvalidBody, by the middleware
//     (auth.go, browser.go, bodies.go, middleware.go, unknown.go, server.go)
//     or by a recipe's handler that checks its body.

// problemFor maps any error a handler returns to its problem document: a
// *Problem is itself; then a request the spec refuses, the rules of the
// recipes' descriptors in registration order, the errors every recipe shares,
// and else 500 internal.
func (s *Server) problemFor(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var pe *paramError
	if errors.As(err, &pe) {
		return pe.problem()
	}
	if p := specProblem(err); p != nil {
		return p
	}
	for _, rule := range s.problems {
		if p := rule(err); p != nil {
			return p
		}
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return NewProblem(http.StatusRequestEntityTooLarge, "body-too-large",
			fmt.Sprintf("the request body is larger than %d bytes (--max-body)", tooLarge.Limit))
	}
	for _, k := range sharedProblems {
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

// sharedProblems map the sentinel errors every recipe may return (recipes/kit's)
// and this package's own to problems, first match first; the detail is the
// error's text unless detail says otherwise. A 503 or a 429 comes with
// Retry-After.
var sharedProblems = []struct {
	err    error
	status int
	name   string
	detail func(error) string
}{
	{kit.ErrInvalidName, http.StatusBadRequest, "invalid-name", func(err error) string {
		return err.Error() + ": names match ^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
	}},
	{kit.ErrInvalidArgument, http.StatusBadRequest, "invalid-parameter", func(err error) string {
		return strings.TrimSuffix(err.Error(), ": "+kit.ErrInvalidArgument.Error()) // the sentinel's words are Go's
	}},
	{kit.ErrLeaseNotFound, http.StatusNotFound, "lease-not-found", nil},
	{kit.ErrLeaseEnded, http.StatusNotFound, "lease-not-found", nil},
	{kit.ErrNotHeld, http.StatusNotFound, "not-held", nil},
	{kit.ErrMemberExists, http.StatusConflict, "member-exists", nil},
	{kit.ErrMemberNotFound, http.StatusNotFound, "member-not-found", nil},
	{errTooManyLeases, http.StatusTooManyRequests, "too-many-leases", nil},
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
		return withParameter(InvalidParameter("%s", refused.Detail), refused.Param)
	default:
		return withParameter(InvalidBody("%s", refused.Detail), refused.Param)
	}
}

// withParameter adds the parameter or body member a 400 is about (as sent,
// shortened), when there is one.
func withParameter(p *Problem, param string) *Problem {
	if param != "" {
		p.Ext = map[string]any{"parameter": param}
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
	p := s.problemFor(err)
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
		if s, ok := v.(string); ok {
			v = specrules.Shorten(s)
		}
		body[k] = v
	}
	body["type"] = ProblemBase + p.Name
	body["title"] = p.Title
	body["status"] = p.Status
	if p.Detail != "" {
		body["detail"] = boundEchoes(p.Detail, r)
	}
	body["instance"] = specrules.Shorten(r.URL.Path)
	if p.RetryAfter > 0 {
		w.Header().Set("Retry-After", fmt.Sprint(p.RetryAfter))
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(body)
}

// maxDetail bounds a problem's detail in bytes, whatever it quotes.
const maxDetail = 2048

// boundEchoes keeps detail from quoting more than specrules.MaxQuoted
// characters of anything the client sent (the contract's bound on echoes):
// the request's path and method where the detail repeats them as they are, and
// every Go-quoted string in it (a name, a value: %q) are shortened; a detail
// still longer than maxDetail is cut. The problems made here quote with
// specrules.Quote already; this holds for every other message too.
func boundEchoes(detail string, r *http.Request) string {
	if len(detail) <= specrules.MaxQuoted {
		return detail
	}
	for _, sent := range []string{r.URL.Path, r.Method} {
		if len(sent) > specrules.MaxQuoted {
			detail = strings.ReplaceAll(detail, sent, specrules.Shorten(sent))
		}
	}
	var b strings.Builder
	for rest := detail; rest != ""; {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			b.WriteByte('"')
			rest = rest[1:]
			continue
		}
		if s, err := strconv.Unquote(q); err == nil && utf8.RuneCountInString(s) > specrules.MaxQuoted {
			b.WriteString(specrules.Quote(s))
		} else {
			b.WriteString(q)
		}
		rest = rest[len(q):]
	}
	detail = b.String()
	if len(detail) > maxDetail {
		cut := maxDetail
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		detail = detail[:cut] + "…"
	}
	return detail
}
