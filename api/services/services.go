// Package services is the HTTP side of service discovery (recipes/service):
// instances registered under /v1/services/{service}/instances/{id}, the
// service's read (a long-poll on version=), its pick, the stream
// /v1/services/{service}/events (event `service`, topic "service/<service>"),
// the list /v1/services and the services' place in the picture.
package services

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
	"github.com/coord-sidecar/coord-sidecar/recipes/service"
)

// Services serves the service discovery operations of openapi.yaml.
type Services struct {
	s        *api.Server
	services *service.Services
}

// Tokens are service discovery's token kind.
func (*Services) Tokens() []string { return []string{"services"} }

// baseFlag moves the base path, as a team's Curator ServiceDiscovery has it.
const baseFlag = "services-base"

// Flags are service discovery's own: --services-base (COORD_SERVICES_BASE),
// the base path, empty for <zk-root>/services.
func (*Services) Flags() []api.Flag {
	return []api.Flag{{Name: baseFlag, Check: service.CheckBase,
		Usage: "base path of service discovery, a Curator ServiceDiscovery's basePath such as /services (default: <zk-root>/services)"}}
}

// Setup makes the services on env's session under --services-base and
// describes them: their topic and section "service" (its directory the base
// path, absolute, which --services-base may move outside --zk-root), the
// problems of their errors, how a successor adopts an instance, and the
// close of their pickers' followers.
func (h *Services) Setup(env api.Env) api.Descriptor {
	h.s, h.services = env.Server, service.New(env.Session, env.Flags[baseFlag], env.Registerer)
	return api.Descriptor{
		Topics: map[string]func(topic, name string) func(){"service": h.follow},
		Sections: []picture.Section{{Name: "service", Token: "services", Event: "service", Dir: h.services.Dir(), Field: "service",
			Follow: picture.Followed(h.services.Follow, func(st *service.State) any { return body(st) })}},
		Problems: []api.ProblemRule{
			api.ProblemIs(service.ErrInstanceExists, http.StatusConflict, "instance-exists"),
			api.ProblemIs(service.ErrNoInstances, http.StatusNotFound, "no-instances"),
			api.ProblemIs(service.ErrInvalidInstance, http.StatusBadRequest, "invalid-body"),
		},
		Adoptions: map[string]kit.Adoption{service.InstanceKind: {Adopt: h.services.Adopt}},
		Close:     h.services.Close,
	}
}

func topic(name string) string { return "service/" + name }

// maxPayload caps an instance's payload (it is part of one znode's data).
const maxPayload = 64 << 10

// RegisterServiceInstance registers an instance for a lease (implicit when
// lease= is absent), or updates the lease's own.
func (h *Services) RegisterServiceInstance(ctx context.Context, req oapi.RegisterServiceInstanceRequestObject) (oapi.RegisterServiceInstanceResponseObject, error) {
	p := req.Params
	if err := kit.CheckName("service", req.Service); err != nil {
		return nil, err
	}
	if err := kit.CheckName("instance", req.Id); err != nil {
		return nil, err
	}
	if req.Body == nil {
		return nil, api.NewProblem(http.StatusBadRequest, "invalid-body", `the body must be {"address": "...", ...}`)
	}
	spec := service.Spec{Address: req.Body.Address, Port: req.Body.Port, SSLPort: req.Body.SslPort}
	if req.Body.Payload != nil {
		spec.Payload = *req.Body.Payload
		if len(spec.Payload) > maxPayload {
			return nil, api.InvalidParameter("payload is %d bytes of JSON, above the %d an instance may have", len(spec.Payload), maxPayload)
		}
	}
	if req.Body.UriSpec != nil {
		spec.URISpec = *req.Body.UriSpec
	}
	if err := spec.Check(); err != nil {
		return nil, err
	}
	lease, done, err := h.s.LeaseFor(ctx, p.Lease, p.Ttl)
	if err != nil {
		return nil, err
	}
	r, err := h.services.Register(ctx, lease, req.Service, req.Id, spec)
	if err := done(err); err != nil {
		return nil, err
	}
	out := registered(r)
	if r.Created {
		return oapi.RegisterServiceInstance201JSONResponse(out), nil
	}
	return oapi.RegisterServiceInstance200JSONResponse(out), nil
}

// UnregisterServiceInstance removes the lease's instance.
func (h *Services) UnregisterServiceInstance(ctx context.Context, req oapi.UnregisterServiceInstanceRequestObject) (oapi.UnregisterServiceInstanceResponseObject, error) {
	for _, n := range [][2]string{{"service", req.Service}, {"instance", req.Id}} {
		if err := kit.CheckName(n[0], n[1]); err != nil {
			return nil, err
		}
	}
	lease, err := h.s.OwnLease(ctx, req.Params.Lease)
	if err != nil {
		return nil, err
	}
	if err := h.services.Unregister(ctx, lease, req.Service, req.Id); err != nil {
		return nil, err
	}
	return oapi.UnregisterServiceInstance204Response{}, nil
}

// GetService answers a service's live instances; with version=, once it
// differs.
func (h *Services) GetService(ctx context.Context, req oapi.GetServiceRequestObject) (oapi.GetServiceResponseObject, error) {
	if err := kit.CheckName("service", req.Service); err != nil {
		return nil, err
	}
	wait, err := h.s.WaitParam(req.Params.Wait)
	if err != nil {
		return nil, err
	}
	var st *service.State
	if req.Params.Version == nil {
		st, err = h.services.Inspect(ctx, req.Service)
	} else {
		st, err = h.services.Await(ctx, req.Service, *req.Params.Version, wait)
	}
	if err != nil {
		return nil, err
	}
	return oapi.GetService200JSONResponse(body(st)), nil
}

// PickServiceInstance answers one enabled instance by the strategy.
func (h *Services) PickServiceInstance(ctx context.Context, req oapi.PickServiceInstanceRequestObject) (oapi.PickServiceInstanceResponseObject, error) {
	if err := kit.CheckName("service", req.Service); err != nil {
		return nil, err
	}
	strategy := service.Random
	if s := req.Params.Strategy; s != nil {
		strategy = string(*s)
		switch strategy {
		case service.Random, service.RoundRobin, service.Sticky:
		default:
			if len(strategy) > 64 {
				strategy = strategy[:64] + "..."
			}
			return nil, api.InvalidParameter("strategy=%q is not one of random, round-robin, sticky", strategy)
		}
	}
	in, err := h.services.Pick(ctx, req.Service, strategy)
	if err != nil {
		return nil, err
	}
	return oapi.PickServiceInstance200JSONResponse(instance(*in)), nil
}

// StreamService streams a service's states.
func (h *Services) StreamService(ctx context.Context, req oapi.StreamServiceRequestObject) (oapi.StreamServiceResponseObject, error) {
	if err := kit.CheckName("service", req.Service); err != nil {
		return nil, err
	}
	return stream{h.s.NewStream(ctx, topic(req.Service))}, nil
}

type stream struct{ api.Stream }

// VisitStreamServiceResponse serves GET /v1/services/{service}/events.
func (t stream) VisitStreamServiceResponse(w http.ResponseWriter) error { return t.Serve(w) }

// ListServices answers every service with its instances.
func (h *Services) ListServices(ctx context.Context, req oapi.ListServicesRequestObject) (oapi.ListServicesResponseObject, error) {
	items, next, err := api.List(ctx, req.Params.Prefix, req.Params.Limit, req.Params.After, "services", h.services.List, api.ReadVia(h.services.Inspect, body))
	return oapi.ListServices200JSONResponse{Services: items, Next: next}, err
}

// follow publishes a service's states to its topic (event `service`) from
// the service's follower, while the topic has subscribers. Ids are the
// service's version, raised to the previous id + 1 when not newer.
func (h *Services) follow(topic, name string) (stop func()) {
	return api.FollowStates(h.s, topic, "service", h.services.Follow, name,
		func(st *service.State) int64 { return st.Version },
		func(st *service.State) any { return body(st) })
}

// body is a service's state as the API shows it.
func body(st *service.State) oapi.Service {
	out := oapi.Service{Service: st.Service, Version: st.Version, Instances: []oapi.ServiceInstance{}}
	for _, in := range st.Instances {
		out.Instances = append(out.Instances, instance(in))
	}
	out.Suspended, out.SuspendedSince = api.Suspended(st.Suspended, st.SuspendedSince)
	return out
}

// instance is one instance as the API shows it.
func instance(in service.Instance) oapi.ServiceInstance {
	out := oapi.ServiceInstance{Id: in.ID, Address: in.Address, Port: in.Port, SslPort: in.SSLPort,
		RegisteredAt: in.RegisteredAt, Enabled: in.Enabled}
	if in.Payload != nil {
		p := json.RawMessage(in.Payload)
		out.Payload = &p
	}
	if in.URISpec != "" {
		u := in.URISpec
		out.UriSpec = &u
	}
	return out
}

// registered is a registration's answer: the service, id and lease with the
// instance.
func registered(r *service.Registered) oapi.ServiceRegistered {
	in := instance(r.Instance)
	return oapi.ServiceRegistered{Service: r.Service, Id: r.ID, Lease: r.Lease, Address: in.Address, Port: in.Port,
		SslPort: in.SslPort, Payload: in.Payload, UriSpec: in.UriSpec, RegisteredAt: in.RegisteredAt, Enabled: in.Enabled}
}
