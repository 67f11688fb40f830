// Package registry is the one place where recipes are registered: it composes
// api's shared Server with the HTTP side of every recipe (each in its own
// folder under api/) into the one implementation of the contract, the
// generated oapi.StrictServerInterface, by embedding. Adding a recipe is its
// folder, its openapi.yaml entries, and here its field and its constructor.
package registry

import (
	"net/http"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/counters"
	"github.com/coord-sidecar/coord-sidecar/api/kv"
	"github.com/coord-sidecar/coord-sidecar/api/locks"
	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/api/queues"
	"github.com/coord-sidecar/coord-sidecar/recipes"
	"github.com/coord-sidecar/coord-sidecar/recipes/counter"
	kvstore "github.com/coord-sidecar/coord-sidecar/recipes/kv"
	"github.com/coord-sidecar/coord-sidecar/recipes/queue"
)

// Recipes are the recipes the sidecar serves, made on its session.
type Recipes struct {
	Locks    *recipes.Locks
	Queues   *queue.Queues
	KV       *kvstore.Store
	Counters *counter.Counters
}

// Server is the whole HTTP surface: api.Server's shared parts and its own
// operations, and every recipe's.
type Server struct {
	*api.Server
	*locks.Locks
	*queues.Queues
	*kv.KV
	*counters.Counters
}

var _ oapi.StrictServerInterface = (*Server)(nil)

// New makes the server; each recipe's HTTP side registers its topics and
// picture kinds with the shared api.Server as it is made, in this order (the
// order of the picture's kinds).
func New(opt api.Options, r Recipes) *Server {
	s := api.NewServer(opt)
	srv := &Server{
		Server:   s,
		Locks:    locks.New(s, r.Locks),
		Queues:   queues.New(s, r.Queues),
		KV:       kv.New(s, r.KV),
		Counters: counters.New(s, r.Counters),
	}
	s.RegisterUnmoved()
	return srv
}

// Handler returns the whole HTTP surface (api.Server.Handler over every
// operation).
func (s *Server) Handler() http.Handler { return s.Server.Handler(s) }
