package api

import (
	"time"

	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// name checks a name taken from the path or the query.
func name(kind, s string) error { return kit.CheckName(kind, s) }

// duration parses a Go duration parameter: absent gives def; malformed, negative or
// above max is a 400 invalid-parameter.
func duration(param string, v *string, def, max time.Duration) (time.Duration, error) {
	if v == nil || *v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(*v)
	switch {
	case err != nil:
		return 0, invalidParameter("%s=%q is not a duration such as 250ms, 30s or 5m", param, *v)
	case d < 0:
		return 0, invalidParameter("%s=%q is negative", param, *v)
	case d > max:
		return 0, invalidParameter("%s=%q is above the maximum of %s", param, *v, max)
	}
	return d, nil
}

// waitParam parses wait=: absent or 0s means try once.
func (s *Server) waitParam(v *string) (time.Duration, error) {
	return duration("wait", v, 0, s.opt.MaxWait)
}

// ttlParam parses ttl=: absent gives the default; at least one second.
func (s *Server) ttlParam(v *string) (time.Duration, error) {
	d, err := duration("ttl", v, s.opt.DefaultTTL, s.opt.MaxTTL)
	if err == nil && d < time.Second {
		return 0, invalidParameter("ttl=%q is below the minimum of 1s", *v)
	}
	return d, err
}

// leaseFor returns the lease named by lease= (it must be live), or makes an
// implicit one from ttl= when lease= is absent.
func (s *Server) leaseFor(lease, ttl *string) (*kit.Lease, error) {
	if lease != nil && *lease != "" {
		if err := name("lease", *lease); err != nil {
			return nil, err
		}
		if ttl != nil && *ttl != "" {
			return nil, invalidParameter("ttl= applies to an implicit lease only; lease=%q has its own", *lease)
		}
		return s.opt.Leases.Get(*lease)
	}
	d, err := s.ttlParam(ttl)
	if err != nil {
		return nil, err
	}
	return s.opt.Leases.Grant(d, true)
}
