package kv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kv"
)

// A key written with a lease keeps the hold protocol (holdtest): another
// lease's write of it is refused while it stands. A delete (by any client)
// ends it as lost on its lease.
func TestLeasedKeyConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{ReleaseIsLoss: true, Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		k := kv.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:   kv.Kind,
			Resume: kit.Adoption{Adopt: k.Adopt},
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := k.Put(ctx, name, []byte(lease.ID), "text/plain", nil, lease)
				var refused *kv.VersionMismatchError
				if errors.As(err, &refused) && refused.Version < 0 {
					t.Errorf("a leased write of %q refused with the key absent: %v", name, err)
				}
				return kit.Hold{Kind: kv.Kind, Name: name}, err
			},
			Release: func(ctx context.Context, _ *kit.Lease, h kit.Hold) error { return k.Delete(ctx, h.Name, nil) },
			// A key written with a content type keeps it in a node of its own.
			Nodes: func(h kit.Hold, held []string) []string { return append(held, s.Dir("kv-meta")+"/"+h.Name) },
			Held: func(ctx context.Context, name string) (bool, error) {
				_, err := k.Get(ctx, name)
				if errors.Is(err, kv.ErrKeyNotFound) {
					return false, nil
				}
				return err == nil, err
			},
		}
	}})
}
