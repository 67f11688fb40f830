package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Semaphores, read/write locks and lock event streams (issue 13).

// ownerParam checks owner= (free text, at most maxOwnerBytes).
func ownerParam(v *string) (string, error) {
	if v == nil {
		return "", nil
	}
	if len(*v) > maxOwnerBytes {
		return "", invalidParameter("owner is %d bytes, above the maximum of %d", len(*v), maxOwnerBytes)
	}
	return *v, nil
}

// AcquirePermit takes a permit for a lease (implicit when lease= is absent).
func (s *Server) AcquirePermit(ctx context.Context, req AcquirePermitRequestObject) (AcquirePermitResponseObject, error) {
	p := req.Params
	if err := name("semaphore", req.Name); err != nil {
		return nil, err
	}
	if p.Max < 1 {
		return nil, invalidParameter("max=%d: a semaphore has at least one permit", p.Max)
	}
	wait, err := s.waitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	owner, err := ownerParam(p.Owner)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.leaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	g, err := s.opt.Semaphores.Acquire(ctx, lease, req.Name, owner, p.Max, wait)
	if err := done(err); err != nil {
		return nil, err
	}
	return AcquirePermit201JSONResponse{Name: g.Name, Permit: g.Permit, Lease: g.Lease, Owner: g.Owner,
		Max: g.Max, AcquiredAt: g.AcquiredAt.UTC()}, nil
}

// GetSemaphore shows the semaphore's holders and waiters.
func (s *Server) GetSemaphore(ctx context.Context, req GetSemaphoreRequestObject) (GetSemaphoreResponseObject, error) {
	if err := name("semaphore", req.Name); err != nil {
		return nil, err
	}
	st, err := s.opt.Semaphores.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return GetSemaphore200JSONResponse(semaphoreBody(st)), nil
}

// ReleasePermit releases the permit held by lease=.
func (s *Server) ReleasePermit(ctx context.Context, req ReleasePermitRequestObject) (ReleasePermitResponseObject, error) {
	if err := name("semaphore", req.Name); err != nil {
		return nil, err
	}
	if err := name("permit", req.Permit); err != nil {
		return nil, err
	}
	lease, err := s.ownLease(ctx, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Semaphores.Release(ctx, lease, req.Name, req.Permit); err != nil {
		return nil, err
	}
	return ReleasePermit204Response{}, nil
}

// ListSemaphores answers every semaphore with its holders and waiters.
func (s *Server) ListSemaphores(ctx context.Context, req ListSemaphoresRequestObject) (ListSemaphoresResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachSemaphore)
	return ListSemaphores200JSONResponse{Semaphores: items, Next: next}, err
}

func (s *Server) eachSemaphore(ctx context.Context, p page, fn func(Semaphore)) (*string, error) {
	return each(ctx, "semaphores", p, s.opt.Semaphores.List, readVia(s.opt.Semaphores.Inspect, semaphoreBody), fn)
}

func semaphoreBody(st *recipes.SemaphoreState) Semaphore {
	return Semaphore{Name: st.Name, Holders: semaphoreHolders(st.Holders), Waiters: st.Waiters}
}

func semaphoreHolders(hs []recipes.SemaphoreHolder) []SemaphoreHolder {
	out := []SemaphoreHolder{}
	for _, h := range hs {
		out = append(out, SemaphoreHolder{Permit: h.Permit, Owner: h.Owner, Since: h.Since.UTC()})
	}
	return out
}

// rwMode checks a mode= parameter.
func rwMode(mode string) error {
	if mode != recipes.ReadMode && mode != recipes.WriteMode {
		return invalidParameter("mode=%q: must be read or write", mode)
	}
	return nil
}

// AcquireRWLock takes a read/write lock in a mode for a lease.
func (s *Server) AcquireRWLock(ctx context.Context, req AcquireRWLockRequestObject) (AcquireRWLockResponseObject, error) {
	p := req.Params
	if err := name("rwlock", req.Name); err != nil {
		return nil, err
	}
	if err := rwMode(string(p.Mode)); err != nil {
		return nil, err
	}
	wait, err := s.waitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	owner, err := ownerParam(p.Owner)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.leaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	g, err := s.opt.RWLocks.Acquire(ctx, lease, req.Name, string(p.Mode), owner, wait)
	if err := done(err); err != nil {
		return nil, err
	}
	return AcquireRWLock201JSONResponse{Name: g.Name, Mode: RWLockGrantMode(g.Mode), Lease: g.Lease, Owner: g.Owner,
		FencingToken: g.FencingToken, AcquiredAt: g.AcquiredAt.UTC()}, nil
}

// GetRWLock shows the lock's writer or readers and its waiters.
func (s *Server) GetRWLock(ctx context.Context, req GetRWLockRequestObject) (GetRWLockResponseObject, error) {
	if err := name("rwlock", req.Name); err != nil {
		return nil, err
	}
	st, err := s.opt.RWLocks.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return GetRWLock200JSONResponse(rwlockBody(st)), nil
}

// ReleaseRWLock releases the lock that lease= holds in mode=.
func (s *Server) ReleaseRWLock(ctx context.Context, req ReleaseRWLockRequestObject) (ReleaseRWLockResponseObject, error) {
	if err := name("rwlock", req.Name); err != nil {
		return nil, err
	}
	if err := rwMode(string(req.Params.Mode)); err != nil {
		return nil, err
	}
	lease, err := s.ownLease(ctx, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.RWLocks.Release(ctx, lease, req.Name, string(req.Params.Mode)); err != nil {
		return nil, err
	}
	return ReleaseRWLock204Response{}, nil
}

// ListRWLocks answers every read/write lock with its holders and waiters.
func (s *Server) ListRWLocks(ctx context.Context, req ListRWLocksRequestObject) (ListRWLocksResponseObject, error) {
	items, next, err := listOf(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachRWLock)
	return ListRWLocks200JSONResponse{Rwlocks: items, Next: next}, err
}

func (s *Server) eachRWLock(ctx context.Context, p page, fn func(RWLock)) (*string, error) {
	return each(ctx, "rwlocks", p, s.opt.RWLocks.List, readVia(s.opt.RWLocks.Inspect, rwlockBody), fn)
}

func rwlockBody(st *recipes.RWLockState) RWLock {
	return RWLock{Name: st.Name, Writer: lockHolder(st.Writer), Readers: rwReaders(st.Readers), Waiters: st.Waiters}
}

func rwReaders(rs []recipes.RWReader) []RWReader {
	out := []RWReader{}
	for _, r := range rs {
		out = append(out, RWReader{Owner: r.Owner, Since: r.Since.UTC()})
	}
	return out
}

func lockTopic(name string) string { return "lock/" + name }

// StreamLock streams a lock's holder and waiters.
func (s *Server) StreamLock(ctx context.Context, req StreamLockRequestObject) (StreamLockResponseObject, error) {
	if err := name("lock", req.Name); err != nil {
		return nil, err
	}
	return topicStream{s: s, ctx: ctx, topics: []string{lockTopic(req.Name)}}, nil
}

// VisitStreamLockResponse serves GET /v1/locks/{name}/events.
func (t topicStream) VisitStreamLockResponse(w http.ResponseWriter) error { return t.serve(w) }

// followLock publishes every state of a lock to its topic, from the lock's
// follower (one watch per lock, however many streams); the returned stop ends
// that. Event ids are as followElection's: the zxid of the newest change, raised
// to the previous id + 1 when not newer.
func (s *Server) followLock(topic, name string) (stop func()) {
	f, err := s.opt.Locks.Follow(name)
	if err != nil {
		return nil
	}
	var lastID int64
	cancel := f.Subscribe(func(st *recipes.LockState) {
		body := lockBody(st)
		if data, err := sse.Data(body); err == nil {
			lastID = max(st.Zxid, lastID+1)
			s.broker.Publish(topic, sse.Event{ID: strconv.FormatInt(lastID, 10), Name: "lock", Data: data})
		}
	})
	return func() { cancel(); f.Close() }
}

var _ kit.Holding = (*recipes.Permit)(nil)
var _ kit.Holding = (*recipes.RWGrant)(nil)
