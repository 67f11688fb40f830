package election_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
)

// conformanceElection is the election whose candidates the suite's names are.
const conformanceElection = "conformance-election"

// A candidacy keeps the hold protocol (holdtest): the suite's name is a
// candidate's id in one election, which one live candidate has at a time.
func TestCandidateConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		e := election.New(s, prometheus.NewRegistry())
		return holdtest.Recipe{
			Kind:    election.CandidateKind,
			Resume:  kit.Adoption{Adopt: e.Adopt, Lines: e.Lines()},
			Refused: election.ErrCandidateExists,
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := e.Campaign(ctx, lease, conformanceElection, name, "value-"+lease.ID, 0)
				return kit.Hold{Kind: election.CandidateKind, Name: conformanceElection + "/" + name}, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				_, err := e.Resign(ctx, lease, conformanceElection, strings.TrimPrefix(h.Name, conformanceElection+"/"), false)
				return err
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := e.Inspect(ctx, conformanceElection)
				if err != nil {
					return false, err
				}
				for _, c := range st.Candidates {
					if c.Candidate == name {
						return true, nil
					}
				}
				return false, nil
			},
		}
	}})
}
