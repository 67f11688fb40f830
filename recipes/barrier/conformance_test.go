package barrier_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/barrier"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
)

// A barrier raised for a lease keeps the hold protocol (holdtest). It is
// no exclusive hold: another lease's raise takes it over, and a lower
// (however it was raised) ends the raise as lost on its lease.
func TestRaisedConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{TakenOver: true, ReleaseIsLoss: true, Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		b := barrier.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:   barrier.BarrierKind,
			Resume: kit.Adoption{Adopt: b.AdoptRaised},
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				return kit.Hold{Kind: barrier.BarrierKind, Name: name}, b.RaiseFor(ctx, lease, name)
			},
			Release: func(ctx context.Context, _ *kit.Lease, h kit.Hold) error { return b.Lower(ctx, h.Name) },
			Held:    b.Raised,
		}
	}})
}

// conformanceDouble is the double barrier whose participants the suite's
// names are.
const conformanceDouble = "conformance-double"

// A double barrier's participant keeps the hold protocol (holdtest): the
// suite's name is a participant's id in a double barrier of count 1, which
// one lease has at a time.
func TestParticipantConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		b := barrier.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:    barrier.DoubleBarrierKind,
			Resume:  kit.Adoption{Adopt: b.AdoptParticipant},
			Refused: barrier.ErrParticipantExists,
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := b.Enter(ctx, lease, conformanceDouble, name, 1, 30*time.Second)
				return kit.Hold{Kind: barrier.DoubleBarrierKind, Name: conformanceDouble + "/" + name}, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				return b.Leave(ctx, lease, conformanceDouble, strings.TrimPrefix(h.Name, conformanceDouble+"/"), 30*time.Second)
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := b.InspectDouble(ctx, conformanceDouble)
				if err != nil {
					return false, err
				}
				for _, p := range st.Participants {
					if p == name {
						return true, nil
					}
				}
				return false, nil
			},
		}
	}})
}
