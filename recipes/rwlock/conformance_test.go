package rwlock_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
	"github.com/coord-sidecar/coord-sidecar/recipes/rwlock"
)

// The read/write lock keeps the hold protocol (holdtest) in both modes: a
// write lock against another writer, a read lock against a writer (readers
// share it).
func TestRWLockConformance(t *testing.T) {
	for _, mode := range []string{rwlock.WriteMode, rwlock.ReadMode} {
		t.Run(mode, func(t *testing.T) { holdtest.Run(t, rwlockSubject(mode)) })
	}
}

func rwlockSubject(mode string) holdtest.Subject {
	return holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		rw := rwlock.New(s, prometheus.NewRegistry())
		acquire := func(mode string) func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
			return func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := rw.Acquire(ctx, lease, name, mode, "owner-"+lease.ID, 0)
				return kit.Hold{Kind: rwlock.RWLockKind, Name: name}, err
			}
		}
		return holdtest.Recipe{
			Kind:    rwlock.RWLockKind,
			Refused: lock.ErrLocked,
			Resume:  kit.Adoption{Adopt: rw.Adopt, Lines: rw.Lines()},
			Acquire: acquire(mode),
			Contend: acquire(rwlock.WriteMode),
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				g, ok := kit.Lookup[*rwlock.RWGrant](lease, h)
				if !ok {
					return kit.ErrNotHeld
				}
				return rw.Release(ctx, lease, h.Name, g.Mode)
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := rw.Inspect(ctx, name)
				if err != nil {
					return false, err
				}
				return st.Writer != nil || len(st.Readers) > 0, nil
			},
		}
	}}
}
