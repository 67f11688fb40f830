package lock_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
)

// The lock keeps the hold protocol (holdtest): a lock of the suite's name,
// tried once (no wait).
func TestLockConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		locks := lock.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:    lock.LockKind,
			Refused: lock.ErrLocked,
			Resume:  kit.Adoption{Adopt: locks.Adopt, Lines: locks.Lines()},
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := locks.Acquire(ctx, lease, name, "owner-"+lease.ID, 0)
				return kit.Hold{Kind: lock.LockKind, Name: name}, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				return locks.Release(ctx, lease, h.Name)
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := locks.Inspect(ctx, name)
				if err != nil {
					return false, err
				}
				return st.Holder != nil, nil
			},
		}
	}})
}
