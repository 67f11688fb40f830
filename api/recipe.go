package api

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/api/picture"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Recipe is what the HTTP side of a recipe (api/locks, api/queues, ...)
// implements, and api/leases' lease operations with it: the type that
// api/registry embeds in its Server, one line per kind. The registry sets
// each one up once, in field order, on a zero value of the type.
type Recipe interface {
	// Tokens are its token kinds: the first path segments under /v1/ of its
	// routes whose names a token's allow list governs ("locks"; none for the
	// leases). It is called on a zero value, before any session exists: a
	// tokens file is checked at start and at every reload against them.
	Tokens() []string
	// Setup makes the recipe on env's session, its metrics on env's
	// registerer, readies the receiver to serve its operations, and
	// describes the recipe to the rest of the sidecar.
	Setup(env Env) Descriptor
}

// Env is what a Recipe's Setup is given.
type Env struct {
	// Server is the shared HTTP side: the handlers' leases, paging, streams.
	Server *Server
	// Session is the sidecar's ZooKeeper session; Leases are its leases.
	Session *zookeeper.Session
	Leases  *kit.Leases
	// Registerer receives the recipe's metrics (nil: none registered).
	Registerer prometheus.Registerer
	// Flags are the values of the recipe's own flags (Flagged), by name: each
	// one the command line or the environment set, else its Default. Nil
	// for a recipe without flags.
	Flags map[string]string
}

// Flagged is a Recipe that has command-line flags of its own. Flags is
// called on a zero value, before any session exists (like Tokens): the
// sidecar adds them to its command line and its --help, each also read from
// the environment (EnvName), checks their values before anything starts, and
// hands them to Setup in Env.Flags. So a recipe's settings need no edit
// outside its folders.
type Flagged interface {
	Flags() []Flag
}

// Flag is a command-line flag of a recipe's own, a string (the recipe
// parses it in Check and Setup).
type Flag struct {
	// Name is the flag without its dashes ("services-base"); unique among
	// the sidecar's flags.
	Name string
	// Default is its value when neither the command line nor the
	// environment sets it.
	Default string
	// Usage is its --help text; the environment variable's name is added.
	Usage string
	// Check, when set, refuses a value: the sidecar does not start, and its
	// error (which names the value) follows the flag's name.
	Check func(value string) error
}

// EnvName is the environment variable that sets flag name, as every flag of
// the sidecar has one: COORD_ and the name in upper case, its dashes as
// underscores ("services-base": COORD_SERVICES_BASE).
func EnvName(name string) string {
	return "COORD_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Descriptor is everything the rest of the sidecar needs to know of one
// recipe, besides its routes (the methods of its Recipe) and its token kinds
// (Recipe.Tokens). Every field may be empty.
type Descriptor struct {
	// Topics follow the broker topics of a topic kind ("lock": the topics
	// "lock/{name}", which the recipe's event streams subscribe to) while they
	// have subscribers: follow(topic, name) starts publishing name's states to
	// topic (Server.Publish) and returns how to stop (nil: nothing to follow).
	Topics map[string]func(topic, name string) (stop func())
	// Sections are what it shows in the picture (GET /v1/events, the status
	// page), in this order; each names the token kind that reaches its names.
	Sections []picture.Section
	// Problems turn the recipe's own errors into problem documents
	// (ProblemIs, ProblemAs), tried in order before the ones every recipe
	// shares (problem.go).
	Problems []ProblemRule
	// Adoptions say how a successor takes over the recipe's holds after a
	// restart, by hold kind (kit.Hold.Kind).
	Adoptions map[string]kit.Adoption
	// Close, when set, ends what the recipe runs in the background; it is
	// called once the session is closed and the leases have ended.
	Close func()
	// NestedNames are its token kinds whose names may contain "/" (kv's keys,
	// "config/app/db", sent with plain slashes), each with how many of a
	// request's path segments after /v1/<kind>/ form the name, given the
	// request's method and those segments (escaped); the segments after them
	// are the route's own ("events"), and 0 means the path names nothing (a
	// route of the kind's own, such as /v1/kv/events). Before routing and
	// authorization, the name's slashes are escaped (%2F) in the path the
	// router sees, so that a route's one {name} segment takes the whole name
	// and a token's allow list is matched against it whole.
	NestedNames map[string]func(method string, segs []string) int
}

// ProblemRule is the problem document of the errors a rule knows, nil for any
// other.
type ProblemRule func(err error) *Problem

// ProblemIs is the rule of a sentinel error: an error that is (errors.Is)
// sentinel answers status with problem name, its text as the detail; a 503 or
// a 429 comes with Retry-After.
func ProblemIs(sentinel error, status int, name string) ProblemRule {
	return func(err error) *Problem {
		if !errors.Is(err, sentinel) {
			return nil
		}
		p := NewProblem(status, name, err.Error())
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			p.RetryAfter = 1
		}
		return p
	}
}

// ProblemAs is the rule of an error type that carries state for the problem's
// extension members: problem is called with the whole error and the first E
// in its chain (errors.As).
func ProblemAs[E error](problem func(err error, e E) *Problem) ProblemRule {
	return func(err error) *Problem {
		var e E
		if !errors.As(err, &e) {
			return nil
		}
		return problem(err, e)
	}
}

// ProblemWith is ProblemAs for the usual case: an error whose chain holds an
// E answers status with problem name, its text as the detail (then "; " and
// hint, when hint is not empty), and ext(e) as the extension members.
func ProblemWith[E error](status int, name, hint string, ext func(e E) map[string]any) ProblemRule {
	return ProblemAs(func(err error, e E) *Problem {
		detail := err.Error()
		if hint != "" {
			detail += "; " + hint
		}
		p := NewProblem(status, name, detail)
		p.Ext = ext(e)
		return p
	})
}

// Register adds a recipe's descriptor, and its token kinds, to what the
// server's shared parts dispatch to: the topics of its streams, the sections
// of the picture, its problems. api/registry calls it once per recipe while
// the server is put together, before it serves. A topic kind, a section or a
// token kind registered twice, or a section whose token kind is not one of
// tokens, panics.
func (s *Server) Register(tokens []string, d Descriptor) {
	for _, t := range tokens {
		if slices.Contains(s.tokenKinds, t) {
			panic("api: token kind " + t + " registered twice")
		}
		s.tokenKinds = append(s.tokenKinds, t)
	}
	for kind, follow := range d.Topics {
		if s.topics[kind] != nil {
			panic("api: topic kind " + kind + " registered twice")
		}
		s.topics[kind] = follow
	}
	for _, sec := range d.Sections {
		if _, dup := s.sectionTokens[sec.Name]; dup {
			panic("api: section " + sec.Name + " registered twice")
		}
		if !slices.Contains(tokens, sec.Token) {
			panic(fmt.Sprintf("api: section %s names token kind %q, not one of its recipe's %v", sec.Name, sec.Token, tokens))
		}
		s.sectionTokens[sec.Name] = sec.Token
	}
	for kind, split := range d.NestedNames {
		if !slices.Contains(tokens, kind) {
			panic(fmt.Sprintf("api: nested names of %q, not one of its recipe's token kinds %v", kind, tokens))
		}
		s.nested[kind] = split
	}
	s.sections = append(s.sections, d.Sections...)
	s.problems = append(s.problems, d.Problems...)
}

// TokenKinds are the token kinds registered, in registration order.
func (s *Server) TokenKinds() []string { return slices.Clone(s.tokenKinds) }

// Sections are the picture's sections registered, in registration order.
func (s *Server) Sections() []picture.Section { return slices.Clone(s.sections) }

// TopicKinds are the topic kinds registered, in no order.
func (s *Server) TopicKinds() []string {
	kinds := make([]string, 0, len(s.topics))
	for k := range s.topics {
		kinds = append(kinds, k)
	}
	return kinds
}
