// Package registry is the one place where recipes are registered: it composes
// api's shared Server with the HTTP side of every recipe (each in its own
// folder under api/) into the one implementation of the contract, the
// generated oapi.StrictServerInterface, by embedding. Adding a recipe is its
// folder, its openapi.yaml entries, and here its field in Recipes, its
// embedded type in Server and its constructor in New.
package registry

import (
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/barriers"
	"github.com/coord-sidecar/coord-sidecar/api/counters"
	"github.com/coord-sidecar/coord-sidecar/api/elections"
	"github.com/coord-sidecar/coord-sidecar/api/groups"
	"github.com/coord-sidecar/coord-sidecar/api/kv"
	"github.com/coord-sidecar/coord-sidecar/api/leases"
	"github.com/coord-sidecar/coord-sidecar/api/locks"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/partitions"
	"github.com/coord-sidecar/coord-sidecar/api/queues"
	"github.com/coord-sidecar/coord-sidecar/api/rwlocks"
	"github.com/coord-sidecar/coord-sidecar/api/semaphores"
	"github.com/coord-sidecar/coord-sidecar/api/throughput"
	"github.com/coord-sidecar/coord-sidecar/recipes/barrier"
	"github.com/coord-sidecar/coord-sidecar/recipes/counter"
	"github.com/coord-sidecar/coord-sidecar/recipes/election"
	"github.com/coord-sidecar/coord-sidecar/recipes/group"
	kvstore "github.com/coord-sidecar/coord-sidecar/recipes/kv"
	"github.com/coord-sidecar/coord-sidecar/recipes/lock"
	"github.com/coord-sidecar/coord-sidecar/recipes/partition"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
	"github.com/coord-sidecar/coord-sidecar/recipes/rwlock"
	"github.com/coord-sidecar/coord-sidecar/recipes/semaphore"
	throughputs "github.com/coord-sidecar/coord-sidecar/recipes/throughput"
)

// Recipes are the recipes the sidecar serves, made on its session.
type Recipes struct {
	Locks      *lock.Locks
	Elections  *election.Elections
	Throughput *throughputs.Throughputs
	Queues     *queue.Queues
	Barriers   *barrier.Barriers
	KV         *kvstore.Store
	Counters   *counter.Counters
	Semaphores *semaphore.Semaphores
	RWLocks    *rwlock.RWLocks
	Groups     *group.Groups
	Partitions *partition.Partitions
}

// Server is the whole HTTP surface: api.Server's shared parts and its own
// operations (session, health, the picture's stream), the leases', and every
// recipe's.
type Server struct {
	*api.Server
	*leases.Leases
	*locks.Locks
	*elections.Elections
	*throughput.Throughput
	*queues.Queues
	*barriers.Barriers
	*kv.KV
	*counters.Counters
	*semaphores.Semaphores
	*rwlocks.RWLocks
	*groups.Groups
	*partitions.Partitions
}

var _ oapi.StrictServerInterface = (*Server)(nil)

// New makes the server; each recipe's HTTP side registers its topics and
// picture kinds with the shared api.Server as it is made, in this order (the
// order of the picture's kinds).
func New(opt api.Options, r Recipes) *Server {
	s := api.NewServer(opt)
	return &Server{
		Server:     s,
		Leases:     leases.New(s, opt.Leases),
		Locks:      locks.New(s, r.Locks),
		Elections:  elections.New(s, r.Elections),
		Throughput: throughput.New(s, r.Throughput),
		Queues:     queues.New(s, r.Queues),
		Barriers:   barriers.New(s, r.Barriers),
		KV:         kv.New(s, r.KV),
		Counters:   counters.New(s, r.Counters),
		Semaphores: semaphores.New(s, r.Semaphores),
		RWLocks:    rwlocks.New(s, r.RWLocks),
		Groups:     groups.New(s, r.Groups),
		Partitions: partitions.New(s, r.Partitions),
	}
}

// Handler returns the whole HTTP surface (api.Server.Handler over every
// operation).
func (s *Server) Handler() http.Handler { return s.Server.Handler(s) }
