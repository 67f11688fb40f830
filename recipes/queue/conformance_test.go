package queue_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
)

// errNothingToClaim: a claim found no item (Claim answers nil, nil).
var errNothingToClaim = errors.New("no item to claim")

// A claim keeps the hold protocol (holdtest): the suite's name is a queue
// holding one item, which one claim holds at a time.
func TestClaimConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		q := queue.New(s, prometheus.NewRegistry())
		t.Cleanup(q.Close)
		return holdtest.Recipe{
			Kind:    queue.ClaimKind,
			Resume:  kit.Adoption{Adopt: q.Adopt},
			Refused: errNothingToClaim,
			Prepare: func(ctx context.Context, name string) error {
				_, err := q.Enqueue(ctx, name, 0, "", []byte("the one item"))
				return err
			},
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				c, err := q.Claim(ctx, lease, name, 0)
				if err != nil {
					return kit.Hold{}, err
				}
				if c == nil {
					return kit.Hold{}, errNothingToClaim
				}
				return kit.Hold{Kind: queue.ClaimKind, Name: name + "/" + c.ID}, nil
			},
			Release: func(ctx context.Context, _ *kit.Lease, h kit.Hold) error {
				name, id, _ := strings.Cut(h.Name, "/")
				return q.Release(ctx, name, id)
			},
			// A claim keeps its item's entry in claims/ too, named by the
			// item's key: the claim id up to its last dot.
			Nodes: func(h kit.Hold, held []string) []string {
				name, id, _ := strings.Cut(h.Name, "/")
				return append(held, s.Dir("queues")+"/"+name+"/claims/"+id[:strings.LastIndexByte(id, '.')])
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := q.Inspect(ctx, name)
				if err != nil {
					return false, err
				}
				return st.Claimed > 0, nil
			},
		}
	}})
}
