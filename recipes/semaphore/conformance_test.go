package semaphore_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/semaphore"
)

// The semaphore keeps the hold protocol (holdtest): a permit of a semaphore
// of one permit, so that a second party is refused while it is held.
func TestSemaphoreConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		sems := semaphore.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:    semaphore.SemaphoreKind,
			Refused: semaphore.ErrSemaphoreFull,
			Resume:  kit.Adoption{Adopt: sems.Adopt, Lines: sems.Lines(), Parts: sems.Parts()},
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := sems.Acquire(ctx, lease, name, "owner-"+lease.ID, 1, 0)
				return kit.Hold{Kind: semaphore.SemaphoreKind, Name: name}, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				p, ok := kit.Lookup[*semaphore.Permit](lease, h)
				if !ok {
					return kit.ErrNotHeld
				}
				return sems.Release(ctx, lease, h.Name, p.Permit)
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := sems.Inspect(ctx, name)
				if err != nil {
					return false, err
				}
				return len(st.Holders) > 0, nil
			},
		}
	}})
}
