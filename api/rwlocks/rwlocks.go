// Package rwlocks is the HTTP side of the read/write locks (rwlock.RWLocks):
// acquire and release in a mode, inspect, list, and its place in the picture.
package rwlocks

import (
	"context"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/rwlock"
)

// RWLocks serves the read/write lock operations of openapi.yaml.
type RWLocks struct {
	s       *api.Server
	rwlocks *rwlock.RWLocks
}

var _ kit.Holding = (*rwlock.RWGrant)(nil)

// Tokens are the read/write lock's token kind.
func (*RWLocks) Tokens() []string { return []string{"rwlocks"} }

// Setup makes the read/write lock on env's session and describes it: its
// section "rwlock", the lock-held problem, and how a successor adopts its
// holds.
func (h *RWLocks) Setup(env api.Env) api.Descriptor {
	h.s, h.rwlocks = env.Server, rwlock.New(env.Session, env.Registerer)
	return api.Descriptor{
		Sections: []picture.Section{{Name: "rwlock", Token: "rwlocks", Event: "rwlock", Dir: "rwlocks", Field: "name",
			Follow: picture.Followed(h.rwlocks.Follow, func(st *rwlock.RWLockState) any { return body(st) })}},
		Problems: []api.ProblemRule{
			api.ProblemWith(http.StatusConflict, "lock-held", "",
				func(locked *rwlock.RWLockedError) map[string]any {
					return map[string]any{"writer": api.LockHolder(locked.Writer), "readers": api.RWReaders(locked.Readers)}
				}),
		},
		Adoptions: map[string]kit.Adoption{rwlock.RWLockKind: {Adopt: h.rwlocks.Adopt, Lines: h.rwlocks.Lines()}},
	}
}

// checkMode checks a mode= parameter.
func checkMode(mode string) error {
	if mode != rwlock.ReadMode && mode != rwlock.WriteMode {
		return api.InvalidParameter("mode=%q: must be read or write", mode)
	}
	return nil
}

// AcquireRWLock takes a read/write lock in a mode for a lease.
func (h *RWLocks) AcquireRWLock(ctx context.Context, req oapi.AcquireRWLockRequestObject) (oapi.AcquireRWLockResponseObject, error) {
	p := req.Params
	if err := checkMode(string(p.Mode)); err != nil {
		return nil, err
	}
	hold, err := h.s.HoldFor(api.HoldRequest{Wait: p.Wait, Owner: p.Owner, Lease: p.Lease, TTL: p.Ttl})
	if err != nil {
		return nil, err
	}
	g, err := h.rwlocks.Acquire(ctx, hold, req.Name, string(p.Mode), hold.Owner, hold.Wait)
	if err := hold.Done(err); err != nil {
		return nil, err
	}
	return oapi.AcquireRWLock201JSONResponse{Name: g.Name, Mode: oapi.RWLockGrantMode(g.Mode), Lease: g.Lease, Owner: g.Owner,
		FencingToken: g.FencingToken, AcquiredAt: g.AcquiredAt.UTC()}, nil
}

// GetRWLock shows the lock's writer or readers and its waiters.
func (h *RWLocks) GetRWLock(ctx context.Context, req oapi.GetRWLockRequestObject) (oapi.GetRWLockResponseObject, error) {
	st, err := h.rwlocks.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetRWLock200JSONResponse(body(st)), nil
}

// ReleaseRWLock releases the lock that lease= holds in mode=.
func (h *RWLocks) ReleaseRWLock(ctx context.Context, req oapi.ReleaseRWLockRequestObject) (oapi.ReleaseRWLockResponseObject, error) {
	if err := checkMode(string(req.Params.Mode)); err != nil {
		return nil, err
	}
	if err := h.rwlocks.Release(ctx, h.s.Owned(req.Params.Lease), req.Name, string(req.Params.Mode)); err != nil {
		return nil, err
	}
	return oapi.ReleaseRWLock204Response{}, nil
}

// ListRWLocks answers every read/write lock with its holders and waiters.
func (h *RWLocks) ListRWLocks(ctx context.Context, req oapi.ListRWLocksRequestObject) (oapi.ListRWLocksResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "rwlocks", h.rwlocks.List, api.ReadVia(h.rwlocks.Inspect, body))
	return oapi.ListRWLocks200JSONResponse{Rwlocks: items, Next: next}, err
}

// body is a read/write lock's state as the API shows it; a lock without a
// writer has a null writer.
func body(st *rwlock.RWLockState) oapi.RWLock {
	return oapi.RWLock{Name: st.Name, Writer: api.LockHolder(st.Writer), Readers: api.RWReaders(st.Readers), Waiters: st.Waiters}
}
