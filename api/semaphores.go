package api

import (
	"context"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Read/write locks (issue 13).

// rwMode checks a mode= parameter.
func rwMode(mode string) error {
	if mode != recipes.ReadMode && mode != recipes.WriteMode {
		return InvalidParameter("mode=%q: must be read or write", mode)
	}
	return nil
}

// AcquireRWLock takes a read/write lock in a mode for a lease.
func (s *Server) AcquireRWLock(ctx context.Context, req oapi.AcquireRWLockRequestObject) (oapi.AcquireRWLockResponseObject, error) {
	p := req.Params
	if err := name("rwlock", req.Name); err != nil {
		return nil, err
	}
	if err := rwMode(string(p.Mode)); err != nil {
		return nil, err
	}
	wait, err := s.WaitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	owner, err := OwnerParam(p.Owner)
	if err != nil {
		return nil, err
	}
	lease, done, err := s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	g, err := s.opt.RWLocks.Acquire(ctx, lease, req.Name, string(p.Mode), owner, wait)
	if err := done(err); err != nil {
		return nil, err
	}
	return oapi.AcquireRWLock201JSONResponse{Name: g.Name, Mode: oapi.RWLockGrantMode(g.Mode), Lease: g.Lease, Owner: g.Owner,
		FencingToken: g.FencingToken, AcquiredAt: g.AcquiredAt.UTC()}, nil
}

// GetRWLock shows the lock's writer or readers and its waiters.
func (s *Server) GetRWLock(ctx context.Context, req oapi.GetRWLockRequestObject) (oapi.GetRWLockResponseObject, error) {
	if err := name("rwlock", req.Name); err != nil {
		return nil, err
	}
	st, err := s.opt.RWLocks.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return oapi.GetRWLock200JSONResponse(rwlockBody(st)), nil
}

// ReleaseRWLock releases the lock that lease= holds in mode=.
func (s *Server) ReleaseRWLock(ctx context.Context, req oapi.ReleaseRWLockRequestObject) (oapi.ReleaseRWLockResponseObject, error) {
	if err := name("rwlock", req.Name); err != nil {
		return nil, err
	}
	if err := rwMode(string(req.Params.Mode)); err != nil {
		return nil, err
	}
	lease, err := s.OwnLease(ctx, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.RWLocks.Release(ctx, lease, req.Name, string(req.Params.Mode)); err != nil {
		return nil, err
	}
	return oapi.ReleaseRWLock204Response{}, nil
}

// ListRWLocks answers every read/write lock with its holders and waiters.
func (s *Server) ListRWLocks(ctx context.Context, req oapi.ListRWLocksRequestObject) (oapi.ListRWLocksResponseObject, error) {
	items, next, err := ListPage(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, s.eachRWLock)
	return oapi.ListRWLocks200JSONResponse{Rwlocks: items, Next: next}, err
}

func (s *Server) eachRWLock(ctx context.Context, p Page, fn func(oapi.RWLock)) (*string, error) {
	return Each(ctx, "rwlocks", p, s.opt.RWLocks.List, ReadVia(s.opt.RWLocks.Inspect, rwlockBody), fn)
}

func rwlockBody(st *recipes.RWLockState) oapi.RWLock {
	return oapi.RWLock{Name: st.Name, Writer: LockHolder(st.Writer), Readers: RWReaders(st.Readers), Waiters: st.Waiters}
}

var _ kit.Holding = (*recipes.RWGrant)(nil)
