package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/specrules"
	"github.com/coord-sidecar/coord-sidecar/api/tokens"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// name checks a name taken from the path or the query.
func name(kind, s string) error { return kit.CheckName(kind, s) }

// InvalidParameter is a 400 invalid-parameter problem with a formatted detail.
func InvalidParameter(format string, args ...any) *Problem {
	return NewProblem(http.StatusBadRequest, "invalid-parameter", fmt.Sprintf(format, args...))
}

// duration parses a Go duration parameter: absent gives def; malformed, negative or
// above max is a 400 invalid-parameter.
func duration(param string, v *string, def, max time.Duration) (time.Duration, error) {
	if v == nil || *v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(*v)
	switch {
	case err != nil:
		return 0, &paramError{param, *v, "is not a duration such as 250ms, 30s or 5m"}
	case d < 0:
		return 0, &paramError{param, *v, fmt.Sprintf("is negative: %s takes a duration from 0s to %s", param, max)}
	case d > max:
		return 0, &paramError{param, *v, fmt.Sprintf("is above the maximum of %s", max)}
	}
	return d, nil
}

// paramError is a query parameter refused: its name, its value as sent and
// why, in the user's words. It is made where the value is checked, and
// becomes its problem (400 invalid-parameter naming the parameter, the value
// quoted and shortened) only when answered (Server.problemFor): the checks
// build no problem of their own.
type paramError struct{ param, value, why string }

func (e *paramError) Error() string { return fmt.Sprintf("%s=%q %s", e.param, e.value, e.why) }

// problem is e's problem document.
func (e *paramError) problem() *Problem {
	return withParameter(InvalidParameter("%s=%s %s", e.param, specrules.Quote(e.value), e.why), e.param)
}

// WaitParam parses wait=: absent or 0s means try once.
func (s *Server) WaitParam(v *string) (time.Duration, error) {
	return duration("wait", v, 0, s.opt.MaxWait)
}

// TTLParam parses ttl=: absent gives the default (--default-ttl); at least one
// second, at most --max-ttl, else a 400 invalid-parameter.
func (s *Server) TTLParam(v *string) (time.Duration, error) {
	d, err := duration("ttl", v, s.opt.DefaultTTL, s.opt.MaxTTL)
	if err == nil && d < time.Second {
		return 0, &paramError{"ttl", *v, "is below the minimum of 1s"}
	}
	return d, err
}

// GrantLease makes a lease of ttl owned by the request's token (implicit: made
// for one request, by LeaseFor), unless MaxLeases leases are live already, or
// the token holds its share of them (429 too-many-leases either way; checked
// and granted as one step).
func (s *Server) GrantLease(ctx context.Context, ttl time.Duration, implicit bool) (*kit.Lease, error) {
	p := tokens.FromContext(ctx)
	s.grantMu.Lock()
	defer s.grantMu.Unlock()
	if own, ok := p.Share(tokens.Leases, s.opt.MaxLeases); ok {
		if n := s.opt.Leases.LenOf(p.Name()); n >= own {
			s.metrics.refused(tokens.Leases, true)
			return nil, fmt.Errorf("token %q holds %d live leases, its own cap (maxLeases): %w", p.Name(), n, errTooManyLeases)
		}
	}
	if n := s.opt.Leases.Len(); n >= s.opt.MaxLeases {
		s.metrics.refused(tokens.Leases, false)
		return nil, fmt.Errorf("%d leases are live, the most this sidecar keeps (--max-leases): %w", n, errTooManyLeases)
	}
	return s.opt.Leases.GrantTo(ctx, p.Name(), ttl, implicit)
}

// LeaseFor returns the lease named by lease= (a live lease of the request's
// token), or makes an implicit one from ttl= when lease= is absent. The caller
// passes the outcome of its request through done, which returns it unchanged:
// after a failure, an implicit lease made here that holds nothing is revoked, so
// that a rejected request leaves no lease behind.
func (s *Server) LeaseFor(ctx context.Context, lease, ttl *string) (l *kit.Lease, done func(error) error, err error) {
	l, implicit, err := s.leaseFor(ctx, lease, ttl)
	if err != nil || !implicit {
		return l, keep, err
	}
	return l, func(err error) error { return s.leftOver(l, err) }, nil
}

// leaseFor is LeaseFor's lease, and whether it was made here (implicit).
func (s *Server) leaseFor(ctx context.Context, lease, ttl *string) (*kit.Lease, bool, error) {
	if lease != nil && *lease != "" {
		if ttl != nil && *ttl != "" {
			if err := name("lease", *lease); err != nil {
				return nil, false, err
			}
			return nil, false, InvalidParameter("ttl= applies to an implicit lease only; lease=%q has its own", *lease)
		}
		l, err := s.OwnLease(ctx, *lease)
		return l, false, err
	}
	d, err := s.TTLParam(ttl)
	if err != nil {
		return nil, false, err
	}
	l, err := s.GrantLease(ctx, d, true)
	return l, err == nil, err
}

// leftOver returns err unchanged; after a failure, it revokes the implicit
// lease l when it holds nothing.
func (s *Server) leftOver(l *kit.Lease, err error) error {
	if err != nil && len(l.Holds()) == 0 {
		_ = s.opt.Leases.Revoke(l.ID)
	}
	return err
}

func keep(err error) error { return err }

// MemberJoin checks a join's group and member names and its weight (default 1,
// at most max), for the groups whose members carry a weight.
func MemberJoin(group, id string, weight *int, max int64) (int64, error) {
	if err := name("group", group); err != nil {
		return 0, err
	}
	if err := name("member", id); err != nil {
		return 0, err
	}
	w := int64(1)
	if weight != nil {
		w = int64(*weight)
	}
	if w < 1 || w > max {
		return 0, InvalidParameter("weight=%d is not between 1 and %d", w, max)
	}
	return w, nil
}

// MemberPoll checks a member GET's group and id and parses its wait=.
func (s *Server) MemberPoll(group, id string, wait *string) (time.Duration, error) {
	if err := name("group", group); err != nil {
		return 0, err
	}
	if err := name("member", id); err != nil {
		return 0, err
	}
	return s.WaitParam(wait)
}

// MemberLease checks a member request's group, id and lease= (in this order)
// and returns the lease, which must be the request's token's (OwnLease).
func (s *Server) MemberLease(ctx context.Context, group, id, lease string) (*kit.Lease, error) {
	for _, n := range [][2]string{{"group", group}, {"member", id}, {"lease", lease}} {
		if err := name(n[0], n[1]); err != nil {
			return nil, err
		}
	}
	return s.OwnLease(ctx, lease)
}

// OwnerParam checks owner= (free text, at most maxOwnerBytes).
func OwnerParam(v *string) (string, error) {
	if v == nil {
		return "", nil
	}
	if len(*v) > maxOwnerBytes {
		return "", &paramError{"owner", *v, fmt.Sprintf("is %d bytes long: owner takes at most %d bytes", len(*v), maxOwnerBytes)}
	}
	return *v, nil
}

// maxOwnerBytes bounds owner= (a lock's or a permit's free-text owner).
const maxOwnerBytes = 256

// The lease of the request: a lease belongs to the token that made it, and under
// any other token it does not exist.

// OwnLease returns the live lease id of the request's token, or ErrLeaseNotFound.
func (s *Server) OwnLease(ctx context.Context, id string) (*kit.Lease, error) {
	if err := name("lease", id); err != nil {
		return nil, err
	}
	l, err := s.opt.Leases.Get(id)
	if err != nil {
		return nil, err
	}
	if l.Owner != tokens.FromContext(ctx).Name() {
		return nil, fmt.Errorf("lease %q: %w", id, kit.ErrLeaseNotFound)
	}
	return l, nil
}

// Owns tells whether lease l belongs to the request's token: what a lease of
// another token holds (a queue's claim) does not exist for the request.
func Owns(ctx context.Context, l *kit.Lease) bool { return l.Owner == principalOf(ctx).name }

// HoldRequest is what a request that takes a hold (a lock, a permit, ...) says
// of it: wait=, owner=, and lease= or ttl=.
type HoldRequest struct{ Wait, Owner, Lease, TTL *string }

// Hold is a checked HoldRequest: how long the request may wait and the
// holder's owner text. It is the hold's kit.LeaseSource: the recipe asks it for
// the lease once the recipe's own arguments are checked, and only then is the
// lease found (lease=) or an implicit one made (ttl=), so that a request
// refused for its name makes no lease and waits for no session.
type Hold struct {
	Wait  time.Duration
	Owner string

	s          *Server
	lease, ttl *string
	implicit   *kit.Lease // the implicit lease Lease made, if it made one
}

// HoldFor checks a HoldRequest's wait= (WaitParam) and owner= (OwnerParam), in
// this order; its lease= or ttl= are checked when the recipe asks for the lease
// (Lease). The caller passes its outcome through the Hold's Done.
func (s *Server) HoldFor(r HoldRequest) (*Hold, error) {
	wait, err := s.WaitParam(r.Wait)
	if err != nil {
		return nil, err
	}
	owner, err := OwnerParam(r.Owner)
	if err != nil {
		return nil, err
	}
	return &Hold{Wait: wait, Owner: owner, s: s, lease: r.Lease, ttl: r.TTL}, nil
}

// Lease returns the hold's lease (LeaseFor: lease=, or an implicit one made from
// ttl=); the recipe asks once.
func (h *Hold) Lease(ctx context.Context) (*kit.Lease, error) {
	l, implicit, err := h.s.leaseFor(ctx, h.lease, h.ttl)
	if implicit {
		h.implicit = l
	}
	return l, err
}

// Done returns err unchanged; after a failure, an implicit lease the hold made
// that holds nothing is revoked, so that a rejected request leaves no lease
// behind.
func (h *Hold) Done(err error) error {
	if h.implicit == nil {
		return err
	}
	return h.s.leftOver(h.implicit, err)
}

// Owned is the lease lease= of a request that acts on a hold it has (a
// release): a kit.LeaseSource that OwnLease answers when the recipe asks, once
// the recipe's own arguments are checked.
func (s *Server) Owned(id string) kit.LeaseSource { return ownedLease{s, id} }

type ownedLease struct {
	s  *Server
	id string
}

func (o ownedLease) Lease(ctx context.Context) (*kit.Lease, error) { return o.s.OwnLease(ctx, o.id) }

// bindingProblem is the 400 invalid-parameter of a parameter the generated
// wrapper could not bind, in the user's words (the binder's own messages are
// the library's): checkQuery refuses what the spec does not allow before the
// wrapper binds, so this is what is left (a required parameter missing).
func bindingProblem(err error) *Problem {
	var (
		required *oapi.RequiredParamError
		header   *oapi.RequiredHeaderError
		format   *oapi.InvalidParamFormatError
		unmarsh  *oapi.UnmarshalingParamError
		many     *oapi.TooManyValuesForParamError
	)
	switch {
	case errors.As(err, &required):
		return withParameter(InvalidParameter("%s is required: this operation needs %s= in the query", required.ParamName, required.ParamName), required.ParamName)
	case errors.As(err, &header):
		return withParameter(InvalidParameter("the header %s is required", header.ParamName), header.ParamName)
	case errors.As(err, &many):
		return withParameter(InvalidParameter("%s is given %d times: give each parameter once", many.ParamName, many.Count), many.ParamName)
	case errors.As(err, &format):
		return withParameter(InvalidParameter("%s is not of its type (see GET /docs/)", format.ParamName), format.ParamName)
	case errors.As(err, &unmarsh):
		return withParameter(InvalidParameter("%s is not of its type (see GET /docs/)", unmarsh.ParamName), unmarsh.ParamName)
	}
	return InvalidParameter("a parameter is not of its type (see GET /docs/)")
}
