// Package locks is the HTTP side of the fair lock (lock.Locks): acquire,
// release, inspect, list, its event stream and its place in the picture.
package locks

import (
	"context"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
)

// Locks serves the lock operations of openapi.yaml.
type Locks struct {
	s     *api.Server
	locks *lock.Locks
}

// Tokens are the lock's token kind.
func (*Locks) Tokens() []string { return []string{"locks"} }

// Setup makes the fair lock on env's session and describes it: its topic and
// section "lock", the lock-held problem, and how a successor adopts its holds.
func (h *Locks) Setup(env api.Env) api.Descriptor {
	h.s, h.locks = env.Server, lock.New(env.Session, env.Registerer)
	return api.Descriptor{
		Topics: map[string]func(topic, name string) func(){"lock": h.follow},
		Sections: []picture.Section{{Name: "lock", Token: "locks", Event: "lock", Dir: "locks", Field: "name",
			Follow: picture.Followed(h.locks.Follow, func(st *lock.LockState) any { return body(st) })}},
		Problems: []api.ProblemRule{
			api.ProblemWith(http.StatusConflict, "lock-held", "",
				func(locked *lock.LockedError) map[string]any {
					return map[string]any{"name": locked.Name, "holder": api.LockHolder(locked.Holder)}
				}),
		},
		Adoptions: map[string]kit.Adoption{lock.LockKind: {Adopt: h.locks.Adopt, Lines: h.locks.Lines()}},
	}
}

// AcquireLock takes a lock for a lease (implicit when lease= is absent).
func (h *Locks) AcquireLock(ctx context.Context, req oapi.AcquireLockRequestObject) (oapi.AcquireLockResponseObject, error) {
	p := req.Params
	hold, err := h.s.HoldFor(api.HoldRequest{Wait: p.Wait, Owner: p.Owner, Lease: p.Lease, TTL: p.Ttl})
	if err != nil {
		return nil, err
	}
	g, err := h.locks.Acquire(ctx, hold, req.Name, hold.Owner, hold.Wait)
	if err := hold.Done(err); err != nil {
		return nil, err
	}
	return oapi.AcquireLock201JSONResponse{
		Name: g.Name, Lease: g.Lease, Owner: g.Owner,
		FencingToken: g.FencingToken, AcquiredAt: g.AcquiredAt.UTC(),
	}, nil
}

// GetLock shows the lock's holder and waiters.
func (h *Locks) GetLock(ctx context.Context, req oapi.GetLockRequestObject) (oapi.GetLockResponseObject, error) {
	st, err := h.locks.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetLock200JSONResponse(body(st)), nil
}

// ReleaseLock releases the lock held by lease=.
func (h *Locks) ReleaseLock(ctx context.Context, req oapi.ReleaseLockRequestObject) (oapi.ReleaseLockResponseObject, error) {
	if err := h.locks.Release(ctx, h.s.Owned(req.Params.Lease), req.Name); err != nil {
		return nil, err
	}
	return oapi.ReleaseLock204Response{}, nil
}

// ListLocks answers every lock with its holder and waiters.
func (h *Locks) ListLocks(ctx context.Context, req oapi.ListLocksRequestObject) (oapi.ListLocksResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "locks", h.locks.List, api.ReadVia(h.locks.Inspect, body))
	return oapi.ListLocks200JSONResponse{Locks: items, Next: next}, err
}

// StreamLock streams a lock's holder and waiters.
func (h *Locks) StreamLock(ctx context.Context, req oapi.StreamLockRequestObject) (oapi.StreamLockResponseObject, error) {
	if err := kit.CheckName("lock", req.Name); err != nil {
		return nil, err
	}
	return stream{h.s.NewStream(ctx, "lock/"+req.Name)}, nil
}

type stream struct{ api.Stream }

// VisitStreamLockResponse serves GET /v1/locks/{name}/events.
func (t stream) VisitStreamLockResponse(w http.ResponseWriter) error { return t.Serve(w) }

// follow publishes every state of a lock to its topic "lock/{name}", from the
// lock's follower (one watch per lock, however many streams).
func (h *Locks) follow(topic, name string) (stop func()) {
	return api.FollowStates(h.s, topic, "lock", h.locks.Follow, name,
		func(st *lock.LockState) int64 { return st.Zxid },
		func(st *lock.LockState) any { return body(st) })
}

// body is a lock's state as the API shows it; a free lock's holder is null.
func body(st *lock.LockState) oapi.LockState {
	out := oapi.LockState{Name: st.Name, Holder: api.LockHolder(st.Holder), Waiters: st.Waiters}
	out.Suspended, out.SuspendedSince = api.Suspended(st.Suspended, st.SuspendedSince)
	return out
}
