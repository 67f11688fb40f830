package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit/holdtest"
	"github.com/coord-sidecar/coord-sidecar/recipes/service"
)

// conformanceService is the service whose instances the suite's names are.
const conformanceService = "conformance-service"

// A registered instance keeps the hold protocol (holdtest): the suite's name
// is an instance's id in one service, which one live lease has at a time.
func TestInstanceConformance(t *testing.T) {
	holdtest.Run(t, holdtest.Subject{Open: func(t testing.TB, s *zookeeper.Session) holdtest.Recipe {
		v := service.New(s, "", prometheus.NewRegistry())
		t.Cleanup(v.Close)
		return holdtest.Recipe{
			Kind:    service.InstanceKind,
			Resume:  kit.Adoption{Adopt: v.Adopt},
			Refused: service.ErrInstanceExists,
			Acquire: func(ctx context.Context, lease *kit.Lease, name string) (kit.Hold, error) {
				_, err := v.Register(ctx, lease, conformanceService, name, service.Spec{Address: "host-" + lease.ID})
				return kit.Hold{Kind: service.InstanceKind, Name: conformanceService + "/" + name}, err
			},
			Release: func(ctx context.Context, lease *kit.Lease, h kit.Hold) error {
				return v.Unregister(ctx, lease, conformanceService, strings.TrimPrefix(h.Name, conformanceService+"/"))
			},
			Held: func(ctx context.Context, name string) (bool, error) {
				st, err := v.Inspect(ctx, conformanceService)
				if err != nil {
					return false, err
				}
				for _, in := range st.Instances {
					if in.ID == name {
						return true, nil
					}
				}
				return false, nil
			},
		}
	}})
}
