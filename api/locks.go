package api

import (
	"context"

	"github.com/coord-sidecar/coord-sidecar/recipes"
)

const maxOwnerBytes = 256

// AcquireLock takes a lock for a lease (implicit when lease= is absent).
func (s *Server) AcquireLock(ctx context.Context, req AcquireLockRequestObject) (AcquireLockResponseObject, error) {
	p := req.Params
	if err := name("lock", req.Name); err != nil {
		return nil, err
	}
	wait, err := s.waitParam(p.Wait)
	if err != nil {
		return nil, err
	}
	owner := ""
	if p.Owner != nil {
		owner = *p.Owner
	}
	if len(owner) > maxOwnerBytes {
		return nil, invalidParameter("owner is %d bytes, above the maximum of %d", len(owner), maxOwnerBytes)
	}
	lease, done, err := s.leaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	g, err := s.opt.Locks.Acquire(ctx, lease, req.Name, owner, wait)
	if err := done(err); err != nil {
		return nil, err
	}
	return AcquireLock201JSONResponse{
		Name: g.Name, Lease: g.Lease, Owner: g.Owner,
		FencingToken: g.FencingToken, AcquiredAt: g.AcquiredAt.UTC(),
	}, nil
}

// GetLock shows the lock's holder and waiters.
func (s *Server) GetLock(ctx context.Context, req GetLockRequestObject) (GetLockResponseObject, error) {
	if err := name("lock", req.Name); err != nil {
		return nil, err
	}
	st, err := s.opt.Locks.Inspect(ctx, req.Name)
	if err != nil {
		return nil, err
	}
	return GetLock200JSONResponse(lockBody(st)), nil
}

// ReleaseLock releases the lock held by lease=.
func (s *Server) ReleaseLock(ctx context.Context, req ReleaseLockRequestObject) (ReleaseLockResponseObject, error) {
	if err := name("lock", req.Name); err != nil {
		return nil, err
	}
	lease, err := s.ownLease(ctx, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := s.opt.Locks.Release(ctx, lease, req.Name); err != nil {
		return nil, err
	}
	return ReleaseLock204Response{}, nil
}

func lockHolder(h *recipes.LockHolder) *LockHolder {
	if h == nil {
		return nil
	}
	return &LockHolder{Owner: h.Owner, FencingToken: h.FencingToken, Since: h.Since.UTC()}
}
