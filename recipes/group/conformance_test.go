package group_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
)

// conformanceGroup is the group whose members the suite's names are.
const conformanceGroup = "conformance-group"

// A membership keeps the hold protocol (holdtest): the suite's name is a
// member's id in one group, which one live member has at a time.
func TestMemberConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		g := group.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:    group.MemberKind,
			Resume:  kit.Adoption{Adopt: g.Adopt},
			Refused: group.ErrMemberExists,
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := g.Join(ctx, lease, conformanceGroup, name, "value-"+lease.ID)
				return kit.Hold{Kind: group.MemberKind, Name: conformanceGroup + "/" + name}, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				return g.Leave(ctx, lease, conformanceGroup, strings.TrimPrefix(h.Name, conformanceGroup+"/"))
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := g.Inspect(ctx, conformanceGroup)
				if err != nil {
					return false, err
				}
				for _, m := range st.Members {
					if m.ID == name {
						return true, nil
					}
				}
				return false, nil
			},
		}
	}})
}
