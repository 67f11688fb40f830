package api

import (
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
	"github.com/coord-sidecar/coord-sidecar/recipes/rwlock"
	"github.com/coord-sidecar/coord-sidecar/recipes/semaphore"
)

// LockHolder is a lock's or a read/write lock writer's holder as the API shows
// it (in their bodies and in the locked problem); nil (JSON null) when free.
func LockHolder(h *lock.LockHolder) *oapi.LockHolder {
	if h == nil {
		return nil
	}
	return &oapi.LockHolder{Owner: h.Owner, FencingToken: h.FencingToken, Since: h.Since.UTC()}
}

// SemaphoreHolders are a semaphore's holders as the API shows them (in its
// body and in the semaphore-full problem).
func SemaphoreHolders(hs []semaphore.SemaphoreHolder) []oapi.SemaphoreHolder {
	out := []oapi.SemaphoreHolder{}
	for _, h := range hs {
		out = append(out, oapi.SemaphoreHolder{Permit: h.Permit, Owner: h.Owner, Since: h.Since.UTC()})
	}
	return out
}

// RWReaders are a read/write lock's readers as the API shows them (in its body
// and in the locked problem).
func RWReaders(rs []rwlock.RWReader) []oapi.RWReader {
	out := make([]oapi.RWReader, 0, len(rs))
	for _, r := range rs {
		out = append(out, oapi.RWReader{Owner: r.Owner, Since: r.Since.UTC()})
	}
	return out
}
