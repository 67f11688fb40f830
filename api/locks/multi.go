package locks

import (
	"context"
	"slices"
	"strings"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
)

// AcquireMultiLock takes every lock of names= for a lease, all or none
// (lock.Locks.AcquireAll), in name order.
func (h *Locks) AcquireMultiLock(ctx context.Context, req oapi.AcquireMultiLockRequestObject) (oapi.AcquireMultiLockResponseObject, error) {
	p := req.Params
	names, err := multiNames(ctx, p.Names)
	if err != nil {
		return nil, err
	}
	hold, err := h.s.HoldFor(api.HoldRequest{Wait: p.Wait, Owner: p.Owner, Lease: p.Lease, TTL: p.Ttl})
	if err != nil {
		return nil, err
	}
	grants, err := h.locks.AcquireAll(ctx, hold, names, hold.Owner, hold.Wait)
	if err := hold.Done(err); err != nil {
		return nil, err
	}
	out := oapi.AcquireMultiLock201JSONResponse{Lease: grants[0].Lease}
	for _, g := range grants {
		out.Locks = append(out.Locks, struct {
			FencingToken int64  `json:"fencingToken"`
			Name         string `json:"name"`
		}{g.FencingToken, g.Name})
	}
	return out, nil
}

// ReleaseMultiLock releases every lock of names= held by lease=.
func (h *Locks) ReleaseMultiLock(ctx context.Context, req oapi.ReleaseMultiLockRequestObject) (oapi.ReleaseMultiLockResponseObject, error) {
	names, err := multiNames(ctx, req.Params.Names)
	if err != nil {
		return nil, err
	}
	if err := h.locks.ReleaseAll(ctx, h.s.Owned(req.Params.Lease), names); err != nil {
		return nil, err
	}
	return oapi.ReleaseMultiLock204Response{}, nil
}

// multiNames parses names= (comma-separated) into name order, refusing an
// empty list, an empty name, a name twice, more than lock.MaxMultiLock, and
// (403) a name the request's token may not change.
func multiNames(ctx context.Context, s string) ([]string, error) {
	names := strings.Split(s, ",")
	switch {
	case s == "":
		return nil, api.InvalidParameter("names= must name at least one lock (a,b,c)")
	case len(names) > lock.MaxMultiLock:
		return nil, api.InvalidParameter("names= lists %d locks; a multi-lock takes at most %d", len(names), lock.MaxMultiLock)
	}
	slices.Sort(names)
	for i, n := range names {
		switch {
		case n == "":
			return nil, api.InvalidParameter("names=%q has an empty name: separate lock names with single commas", s)
		case i > 0 && names[i-1] == n:
			return nil, api.InvalidParameter("names= lists lock %q twice", n)
		}
		if err := api.MayChange(ctx, "locks", n); err != nil {
			return nil, err
		}
	}
	return names, nil
}
