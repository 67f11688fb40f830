package api

import "github.com/coord-sidecar/coord-sidecar/api/picture"

// A recipe's HTTP side lives in a folder of its own (api/locks, api/queues, ...):
// its handlers, the bodies it answers, its list, its stream topic and its kinds
// in the picture. It is built on the Server, which keeps what every recipe
// shares (middleware, problems, paging, leases of a request, auth, streams), and
// registers with it, once, what the Server's shared parts dispatch to it: the
// topics it follows and the kinds it shows. api/registry composes every
// recipe's handlers into the one StrictServerInterface.

// Recipe is what one recipe's HTTP side registers with the Server.
type Recipe struct {
	// Topics follow the broker topics of a kind ("lock": the topics
	// "lock/{name}") while they have subscribers: follow(topic, name) starts
	// publishing name's states to topic (Server.Publish) and returns how to stop
	// (nil: nothing to follow).
	Topics map[string]func(topic, name string) (stop func())
	// Kinds are what it shows in the picture (GET /v1/events, the status page),
	// in the order given.
	Kinds []picture.Kind
}

// Register adds a recipe's topics and picture kinds. It is called while the
// server is put together (api/registry), before it serves; a topic kind
// registered twice panics.
func (s *Server) Register(r Recipe) {
	for kind, follow := range r.Topics {
		if s.topics[kind] != nil {
			panic("api: topic kind " + kind + " registered twice")
		}
		s.topics[kind] = follow
	}
	s.kinds = append(s.kinds, r.Kinds...)
}
