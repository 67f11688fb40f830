package throughput_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/throughput"
)

// conformanceGroup is the throughput group whose members the suite's names are.
const conformanceGroup = "conformance-group"

// A throughput group's membership keeps the hold protocol (holdtest): the
// suite's name is a member's id in one group, which one live member has at
// a time.
func TestMemberConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		tp := throughput.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:    throughput.MemberKind,
			Resume:  kit.Adoption{Adopt: tp.Adopt},
			Refused: throughput.ErrMemberExists,
			// A limit to share, so that the member leads and is allocated.
			Prepare: func(ctx context.Context, _ string) error {
				_, err := tp.SetLimit(ctx, conformanceGroup, 100)
				return err
			},
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := tp.Join(ctx, lease, conformanceGroup, name, 1)
				return kit.Hold{Kind: throughput.MemberKind, Name: conformanceGroup + "/" + name}, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				return tp.Leave(ctx, lease, conformanceGroup, strings.TrimPrefix(h.Name, conformanceGroup+"/"))
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				_, err := tp.Member(ctx, conformanceGroup, name)
				if errors.Is(err, throughput.ErrMemberNotFound) {
					return false, nil
				}
				return err == nil, err
			},
		}
	}})
}
