package partition_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/partition"
)

// conformanceGroup is the partition group whose members the suite's names are.
const conformanceGroup = "conformance-group"

// A partition group's membership keeps the hold protocol (holdtest): the
// suite's name is a member's id in one group, which one live member has at
// a time.
func TestMemberConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		p := partition.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:    partition.MemberKind,
			Resume:  kit.Adoption{Adopt: p.Adopt},
			Refused: partition.ErrMemberExists,
			// Partitions to deal, so that the member owns some (owner nodes).
			Prepare: func(ctx context.Context, _ string) error {
				_, err := p.SetPartitions(ctx, conformanceGroup, partition.Set{Count: 4})
				return err
			},
			// Joins, then waits until the member owns partitions, so that
			// every case has owner nodes to see stand and go.
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				h := kit.Hold{Kind: partition.MemberKind, Name: conformanceGroup + "/" + name}
				m, err := p.Join(ctx, lease, conformanceGroup, name, 1)
				for err == nil && len(m.Owned) == 0 {
					m, err = p.AwaitMember(ctx, conformanceGroup, name, m.Version, 10*time.Second)
				}
				return h, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				return p.Leave(ctx, lease, conformanceGroup, strings.TrimPrefix(h.Name, conformanceGroup+"/"))
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				_, err := p.Member(ctx, conformanceGroup, name)
				if errors.Is(err, partition.ErrMemberNotFound) {
					return false, nil
				}
				return err == nil, err
			},
		}
	}})
}
