// Package service is service discovery in the layout of Curator's
// ServiceDiscovery (curator-x-discovery): instances registered with an
// address, ports and a payload under a lease, read, picked and followed.
//
// Layout, Curator's: under the base path (<root>/services, or the absolute
// path --services-base names), each service is a container node <service> and
// each instance the ephemeral node <service>/<id> whose data is the instance
// as Curator's JsonInstanceSerializer writes a ServiceInstance (name, id,
// address, port, sslPort, payload, registrationTimeUTC, serviceType DYNAMIC,
// uriSpec, enabled). A Curator ServiceDiscovery on the same base path and the
// sidecar see each other's instances.
//
// Guarantees:
//
//   - An instance lives while its lease lives: it is deleted when the lease is
//     revoked or expires or the instance is unregistered (at once), and by
//     ZooKeeper when the sidecar's session ends (after the session timeout).
//   - A lease registering an id it holds already updates the instance in place
//     (same node, same registration time); an id held by anyone else is
//     ErrInstanceExists and nothing changes.
//   - Instances are listed in registration order (their node's creation zxid).
//   - A service's Version is the highest zxid among its instances' nodes
//     (creation and last change) and the service node's last change of
//     children: it strictly increases with every registration, update and
//     removal, is the same on every sidecar, and costs no write. A service
//     without a node is at version 0.
//   - Pick answers an enabled instance of the service as this sidecar last read
//     it (its follower's state, kept current by watches), or ErrNoInstances.
package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Services are the discoverable services of one sidecar.
type Services struct {
	s       *zookeeper.Session
	dir     string
	metrics serviceMetrics

	followers *kit.Followers[*State]

	mu     sync.Mutex
	local  map[string]bool    // service/id of the instances this sidecar holds or is making
	pick   map[string]*picker // per service: its place for round-robin and sticky, its follower
	closed bool
}

// State is a service as seen at one moment.
type State struct {
	Service string
	Version int64
	// Instances are the live instances in registration order.
	Instances []Instance
	// Suspended is set while this sidecar's session is not connected. During
	// the first part of a suspension the state is the last one read; once the
	// session could have expired, or while there is none, Instances is empty:
	// nobody can be vouched for.
	Suspended bool
	// SuspendedSince is when the suspension began; zero when not suspended.
	SuspendedSince time.Time
}

// Instance is one live instance.
type Instance struct {
	ID      string
	Address string
	Port    *int
	SSLPort *int
	// Payload is the instance's payload as JSON; nil when it has none (null).
	Payload      json.RawMessage
	URISpec      string
	RegisteredAt time.Time
	Enabled      bool
	czxid, mzxid int64
}

// Spec is what a registration says of an instance.
type Spec struct {
	Address string
	Port    *int
	SSLPort *int
	// Payload is any JSON value; empty is none.
	Payload json.RawMessage
	// URISpec is Curator's UriSpec as text, "{scheme}://{address}:{port}";
	// empty is none.
	URISpec string
}

// Check refuses a spec Curator could not read or that names no address.
func (sp Spec) Check() error {
	if strings.TrimSpace(sp.Address) == "" {
		return fmt.Errorf("address is required: %w", ErrInvalidInstance)
	}
	for _, p := range []struct {
		name string
		v    *int
	}{{"port", sp.Port}, {"sslPort", sp.SSLPort}} {
		if p.v != nil && (*p.v < 0 || *p.v > 65535) {
			return fmt.Errorf("%s %d is not within 0..65535: %w", p.name, *p.v, ErrInvalidInstance)
		}
	}
	if len(sp.Payload) > 0 && !json.Valid(sp.Payload) {
		return fmt.Errorf("payload is not JSON: %w", ErrInvalidInstance)
	}
	_, err := parseURISpec(sp.URISpec)
	return err
}

// Registered is what a registration answers.
type Registered struct {
	Service, ID, Lease string
	// Created is true for a new instance, false for an update of the lease's own.
	Created  bool
	Instance Instance
}

// New returns the services over a session, under base: "" for <root>/services,
// else an absolute path (a Curator ServiceDiscovery's base path); reg (may be
// nil) receives their metrics.
func New(s *zookeeper.Session, base string, reg prometheus.Registerer) *Services {
	if base == "" {
		base = DefaultBase
	}
	v := &Services{s: s, dir: s.Dir(base), metrics: newServiceMetrics(reg), local: map[string]bool{}, pick: map[string]*picker{}}
	v.followers = kit.NewFollowers(s, v.metrics.watched, func(name string) kit.Source[*State] {
		return newSource(v, name)
	})
	return v
}

// DefaultBase is the services' base path under --zk-root.
const DefaultBase = "services"

// CheckBase checks a --services-base value: empty, or an absolute znode path
// without a trailing slash.
func CheckBase(base string) error {
	if base == "" {
		return nil
	}
	if !path.IsAbs(base) || base == "/" || path.Clean(base) != base {
		return fmt.Errorf("%q is not an absolute znode path without a trailing slash", base)
	}
	return nil
}

// Dir is the base path's znode (the parent of every service).
func (v *Services) Dir() string { return v.dir }

func (v *Services) servicePath(service string) string { return v.dir + "/" + service }

// InstanceKind is the kind of an instance's hold on its lease (kit.Hold); the
// hold's name is <service>/<id>.
const InstanceKind = "service"

func hold(service, id string) kit.Hold { return kit.Hold{Kind: InstanceKind, Name: service + "/" + id} }

func checkNames(service, id string) error {
	if err := kit.CheckName("service", service); err != nil {
		return err
	}
	return kit.CheckName("instance", id)
}

// registration is a lease's instance: its node under the lease's session.
type registration struct {
	v           *Services
	service, id string
	node        string
	ep          *zookeeper.Epoch
	registered  time.Time // kept by updates, as Curator's updateService keeps it
	mu          sync.Mutex
}

// HeldNodes is the instance node: deleted by another hand, the registration is
// lost.
func (r *registration) HeldNodes() []string { return []string{r.node} }

// Release deletes the instance node (through a suspension, while the session
// lives). The kit calls it once: when the lease ends, the instance is
// unregistered or its node is lost.
func (r *registration) Release(ctx context.Context) error {
	defer r.v.unclaim(r.service, r.id)
	r.v.metrics.instances.Dec()
	err := r.ep.Settle(ctx, func(ctx context.Context) error {
		err := r.ep.Delete(ctx, r.node, -1)
		if errors.Is(err, zookeeper.ErrNoNode) {
			return nil
		}
		return err
	})
	r.v.poke(r.service)
	return err
}

// Adopt makes the instance h of lease its own again after a restart (a
// kit.Adopter): its one saved node is the instance node <service>/<id>, an
// ephemeral node of the lease's (resumed) session holding an instance, and no
// lease of this sidecar has that instance yet. Node, data and registration
// order are unchanged: a Curator ServiceDiscovery and other sidecars see no
// change.
func (v *Services) Adopt(ctx context.Context, lease *kit.Lease, h kit.SavedHold) (kit.Holding, error) {
	service, id, _ := strings.Cut(h.Name, "/")
	if err := checkNames(service, id); err != nil {
		return nil, fmt.Errorf("instance %q: %w", h.Name, err)
	}
	node := v.servicePath(service) + "/" + id
	if len(h.Nodes) != 1 || h.Nodes[0] != node {
		return nil, fmt.Errorf("instance %q of service %q: saved nodes %v are not its node %s", id, service, h.Nodes, node)
	}
	data, _, err := kit.OwnedNode(ctx, lease, node)
	if err != nil {
		return nil, fmt.Errorf("instance %q of service %q: %w", id, service, err)
	}
	in, ok := decode(id, data)
	if !ok {
		return nil, fmt.Errorf("instance %q of service %q: node %s holds no service instance", id, service, node)
	}
	if !v.claim(service, id) {
		return nil, fmt.Errorf("instance %q of service %q: %w", id, service, ErrInstanceExists)
	}
	v.metrics.instances.Inc()
	return &registration{v: v, service: service, id: id, node: node, ep: lease.Epoch(), registered: in.RegisteredAt}, nil
}

// claim reserves service/id on this sidecar: false when one of its leases
// holds (or is making) that instance already.
func (v *Services) claim(service, id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	k := service + "/" + id
	if v.local[k] {
		return false
	}
	v.local[k] = true
	return true
}

func (v *Services) unclaim(service, id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.local, service+"/"+id)
}

// Register makes instance id of service for lease, or, when the lease holds
// that instance already, updates it in place (Created false).
// ErrInstanceExists when the service has a live instance with that id that the
// lease does not hold. The instance goes when the lease ends.
func (v *Services) Register(ctx context.Context, lease *kit.Lease, service, id string, spec Spec) (*Registered, error) {
	if err := checkNames(service, id); err != nil {
		return nil, err
	}
	if err := spec.Check(); err != nil {
		return nil, err
	}
	now := time.Now()
	r, found, err := kit.Acquire(ctx, lease, hold(service, id), func(ctx context.Context, ep *zookeeper.Epoch) (*registration, error) {
		if !v.claim(service, id) {
			return nil, fmt.Errorf("instance %q of service %q: %w", id, service, ErrInstanceExists)
		}
		node := v.servicePath(service) + "/" + id
		data, err := encode(service, id, spec, now)
		if err == nil {
			// CreateOwned adopts a node of this session only after a lost
			// answer or when its data is ours: claim makes sure no other lease
			// of this sidecar has that instance.
			_, err = ep.CreateOwned(ctx, node, data, true)
		}
		if err != nil {
			v.unclaim(service, id)
			if errors.Is(err, zookeeper.ErrNodeExists) {
				return nil, fmt.Errorf("instance %q of service %q: %w", id, service, ErrInstanceExists)
			}
			return nil, fmt.Errorf("register %q in %q: %w", id, service, err)
		}
		v.metrics.instances.Inc()
		v.metrics.registrations.Inc()
		return &registration{v: v, service: service, id: id, node: node, ep: ep, registered: now}, nil
	})
	if err != nil {
		return nil, err
	}
	if found {
		if err := r.update(ctx, spec); err != nil {
			return nil, err
		}
	}
	v.poke(service)
	in, _ := decode(id, mustEncode(service, id, spec, r.registered))
	return &Registered{Service: service, ID: id, Lease: lease.ID, Created: !found, Instance: in}, nil
}

func mustEncode(service, id string, spec Spec, t time.Time) []byte {
	data, _ := encode(service, id, spec, t) // spec was checked
	return data
}

// update writes the lease's instance anew, keeping its registration time.
func (r *registration) update(ctx context.Context, spec Spec) error {
	r.mu.Lock() // one update of an instance at a time: the last answered is the last written
	defer r.mu.Unlock()
	data, err := encode(r.service, r.id, spec, r.registered)
	if err != nil {
		return err
	}
	_, err = r.ep.SetChecked(ctx, r.node, data, -1) // a lost answer is checked
	if errors.Is(err, zookeeper.ErrNoNode) {
		return fmt.Errorf("instance %q of service %q: %w", r.id, r.service, kit.ErrNotHeld)
	}
	if err == nil {
		r.v.metrics.updates.Inc()
	}
	return err
}

// Unregister removes the lease's instance; an implicit lease ends with it.
// ErrNotHeld when the lease holds no such instance.
func (v *Services) Unregister(ctx context.Context, lease *kit.Lease, service, id string) error {
	if err := checkNames(service, id); err != nil {
		return err
	}
	return kit.Release(ctx, lease, hold(service, id))
}

// Inspect reads a service from ZooKeeper (no watches): a service without a
// node has no instances and version 0.
func (v *Services) Inspect(ctx context.Context, service string) (*State, error) {
	if err := kit.CheckName("service", service); err != nil {
		return nil, err
	}
	return newSource(v, service).Inspect(ctx, v.s)
}

// List returns the names of the services that have a node, sorted.
func (v *Services) List(ctx context.Context) ([]string, error) {
	return kit.ListNames(ctx, v.s, v.dir)
}

// Follower follows one service: one set of watches per sidecar, however many
// streams, long-polls and picks.
type Follower = kit.Follower[*State]

// Follow starts following service; Close stops.
func (v *Services) Follow(service string) (*Follower, error) {
	if err := kit.CheckName("service", service); err != nil {
		return nil, err
	}
	return v.followers.Follow(service), nil
}

// poke makes service's follower, if any, read again now.
func (v *Services) poke(service string) {
	if f, err := v.Follow(service); err == nil {
		f.Poke()
		f.Close()
	}
}

// Await answers the service once its version differs from version, or when
// wait ends (then as ZooKeeper has it: Inspect, so ErrUnavailable while the
// session is not connected; a Suspended state is never the answer), or ctx's
// cause once ctx ends.
func (v *Services) Await(ctx context.Context, service string, version int64, wait time.Duration) (*State, error) {
	f, err := v.Follow(service)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, ok := f.Await(ctx, wait, func(s *State) bool { return !s.Suspended && s.Version != version })
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	if !ok {
		return v.Inspect(ctx, service)
	}
	return st, nil
}

func instanceOf(node string, data []byte, st *zookeeper.Stat) (Instance, bool) {
	if !kit.ValidName(node) {
		return Instance{}, false // not an instance node (a protected-create leftover, say)
	}
	in, ok := decode(node, data)
	in.czxid, in.mzxid = st.Czxid, st.Mzxid
	return in, ok
}

// view orders instances by registration (creation zxid) and computes the
// version.
func view(service string, pzxid int64, instances map[string]Instance) *State {
	st := &State{Service: service, Version: pzxid, Instances: make([]Instance, 0, len(instances))}
	for _, in := range instances {
		st.Instances = append(st.Instances, in)
		st.Version = max(st.Version, in.mzxid)
	}
	sort.Slice(st.Instances, func(i, j int) bool { return st.Instances[i].czxid < st.Instances[j].czxid })
	return st
}

// The pick strategies.
const (
	Random     = "random"
	RoundRobin = "round-robin"
	Sticky     = "sticky"
)

// picker is one service's picks on this sidecar: a follower kept open while
// picks come (closed after pickIdle without one), the round-robin's place and
// the sticky instance.
type picker struct {
	f        *Follower
	used     time.Time
	next     uint64
	stickyID string
}

// pickIdle is how long a service's follower stays open after its last pick.
const pickIdle = time.Minute

// maxPickFollowers bounds the followers picks keep open (the watches a client
// picking ever new names could make this sidecar hold); a pick beyond it reads
// its service instead, and its round-robin and sticky keep no place.
const maxPickFollowers = 1000

// Pick answers one enabled instance of service by strategy (Random,
// RoundRobin or Sticky; "" is Random): as this sidecar's follower of the
// service last read it, or read now when the follower has no connected state
// (a first pick, a suspension). RoundRobin and Sticky keep their place per
// sidecar; Sticky answers the same instance while it is enabled.
// ErrNoInstances when there is no enabled instance.
func (v *Services) Pick(ctx context.Context, service, strategy string) (*Instance, error) {
	if err := kit.CheckName("service", service); err != nil {
		return nil, err
	}
	switch strategy {
	case "", Random, RoundRobin, Sticky:
	default:
		return nil, fmt.Errorf("strategy %q is not one of random, round-robin, sticky: %w", strategy, kit.ErrInvalidArgument)
	}
	f, err := v.picking(service)
	if err != nil {
		return nil, err
	}
	var st *State
	ok := false
	if f != nil {
		st, ok = f.Await(ctx, v.s.OpTimeout(), func(s *State) bool { return !s.Suspended })
	}
	if !ok {
		if st, err = v.Inspect(ctx, service); err != nil {
			return nil, err
		}
	}
	enabled := make([]Instance, 0, len(st.Instances))
	for _, in := range st.Instances {
		if in.Enabled {
			enabled = append(enabled, in)
		}
	}
	v.metrics.picks.WithLabelValues(orRandom(strategy)).Inc()
	if len(enabled) == 0 {
		return nil, fmt.Errorf("service %q: %w", service, ErrNoInstances)
	}
	return v.choose(service, strategy, enabled), nil
}

// choose picks one of enabled (not empty) by strategy, keeping the place of
// round-robin and sticky in service's picker (none when it has none: a pick
// beyond maxPickFollowers, or after Close).
func (v *Services) choose(service, strategy string, enabled []Instance) *Instance {
	v.mu.Lock()
	defer v.mu.Unlock()
	p := v.pick[service]
	if p == nil {
		p = &picker{}
	}
	var in Instance
	switch strategy {
	case RoundRobin:
		in = enabled[p.next%uint64(len(enabled))]
		p.next++
	case Sticky:
		for _, e := range enabled {
			if e.ID == p.stickyID {
				return &e
			}
		}
		in = enabled[rand.IntN(len(enabled))]
		p.stickyID = in.ID
	default:
		in = enabled[rand.IntN(len(enabled))]
	}
	return &in
}

func orRandom(strategy string) string {
	if strategy == "" {
		return Random
	}
	return strategy
}

// picking returns service's pick follower, opening it if needed (nil when
// maxPickFollowers are open), and closes the followers of services not picked
// for pickIdle.
func (v *Services) picking(service string) (*Follower, error) {
	now := time.Now()
	var idle []*Follower
	defer func() {
		for _, f := range idle {
			f.Close()
		}
	}()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, kit.ErrClosed
	}
	for name, p := range v.pick {
		if name != service && now.Sub(p.used) > pickIdle {
			idle = append(idle, p.f)
			delete(v.pick, name)
		}
	}
	p := v.pick[service]
	if p == nil && len(v.pick) >= maxPickFollowers {
		return nil, nil // too many services picked at once: this pick reads the service
	}
	if p == nil {
		f, err := v.Follow(service)
		if err != nil {
			return nil, err
		}
		p = &picker{f: f}
		v.pick[service] = p
	}
	p.used = now
	return p.f, nil
}

// Close stops the followers that picks keep open; a pick after it answers
// kit.ErrClosed.
func (v *Services) Close() {
	v.mu.Lock()
	v.closed = true
	pickers := v.pick
	v.pick = map[string]*picker{}
	v.mu.Unlock()
	for _, p := range pickers {
		p.f.Close()
	}
}

type serviceMetrics struct {
	instances     prometheus.Gauge
	watched       prometheus.Gauge
	registrations prometheus.Counter
	updates       prometheus.Counter
	picks         *prometheus.CounterVec
}

func newServiceMetrics(reg prometheus.Registerer) serviceMetrics {
	m := serviceMetrics{
		instances: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_service_instances", Help: "Service instances registered by leases of this sidecar.",
		}),
		watched: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "coord_services_watched", Help: "Services this sidecar follows with one set of ZooKeeper watches each (streams, long-polls, picks).",
		}),
		registrations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_service_registrations_total", Help: "Service instances registered by this sidecar (new nodes).",
		}),
		updates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "coord_service_updates_total", Help: "Updates of registered service instances in place by this sidecar.",
		}),
		picks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "coord_service_picks_total", Help: "Picks of a service instance answered by this sidecar, by strategy (a pick that found none included).",
		}, []string{"strategy"}),
	}
	if reg != nil {
		reg.MustRegister(m.instances, m.watched, m.registrations, m.updates, m.picks)
	}
	return m
}
