// Package registry is the one place where recipes are registered: it composes
// api's shared Server with the HTTP side of every recipe (each in its own
// folder under api/) into the one implementation of the contract, the
// generated oapi.StrictServerInterface, by embedding.
//
// Adding a recipe is its folders (recipes/<kind>, api/<kind>), its
// openapi.yaml entries, and one line here: its HTTP type embedded in Server.
// That type implements api.Recipe: New walks Server's embedded fields once
// and sets each one up (api.Recipe.Setup), in field order, which is the
// order of the picture's sections; every list the rest of the sidecar keeps
// of the recipes (token kinds, topic kinds, sections, problems, adoptions)
// comes from what they describe. A recipe with settings of its own declares
// them as flags (api.Flagged): Flags collects them for the sidecar's command
// line, and Setup gets their values.
package registry

import (
	"fmt"
	"net/http"
	"reflect"

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
	"github.com/coord-sidecar/coord-sidecar/api/services"
	"github.com/coord-sidecar/coord-sidecar/api/throughput"
	"github.com/coord-sidecar/coord-sidecar/api/tokens"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// Server is the whole HTTP surface: api.Server's shared parts and its own
// operations (session, health, the picture's stream), then the leases' and
// every recipe's, one line each.
type Server struct {
	*api.Server
	*leases.Leases
	*locks.Locks
	*rwlocks.RWLocks
	*semaphores.Semaphores
	*elections.Elections
	*barriers.Barriers
	*queues.Queues
	*throughput.Throughput
	*kv.KV
	*counters.Counters
	*groups.Groups
	*partitions.Partitions
	*services.Services

	recipes []described
}

// described is one registered recipe: its field's type and what it said.
type described struct {
	name string
	d    api.Descriptor
}

var _ oapi.StrictServerInterface = (*Server)(nil)

// New makes the server on opt's session and leases: every recipe embedded in
// Server is made and set up (api.Recipe.Setup) in field order, its metrics on
// opt.Registerer, and registered with the shared api.Server. A field whose
// type is not an api.Recipe, or two recipes naming the same token kind,
// topic kind, section or hold kind, panics: the sidecar is built wrong.
func New(opt api.Options) *Server {
	s := &Server{Server: api.NewServer(opt)}
	env := api.Env{Server: s.Server, Session: opt.Session, Leases: opt.Leases, Registerer: opt.Registerer}
	s.recipes = setUp(reflect.ValueOf(s).Elem(), env, opt.RecipeFlags)
	return s
}

// setUp sets up every field of the struct v but its first (the api.Server):
// each a pointer to an api.Recipe, given a new zero value that Setup readies,
// with the values of its own flags (flags, by name; a flag absent there has
// its default).
func setUp(v reflect.Value, env api.Env, flags map[string]string) []described {
	var out []described
	holds := map[string]string{}
	for i := 1; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.Anonymous {
			continue
		}
		r := recipeOf(f)
		env.Flags = flagValues(r, flags)
		d := r.Setup(env)
		env.Server.Register(r.Tokens(), d)
		for kind := range d.Adoptions {
			if other, dup := holds[kind]; dup {
				panic(fmt.Sprintf("registry: hold kind %q is adopted by both %s and %s", kind, other, f.Type))
			}
			holds[kind] = f.Type.String()
		}
		v.Field(i).Set(reflect.ValueOf(r))
		out = append(out, described{name: f.Type.String(), d: d})
	}
	return out
}

// recipeOf is a new zero value of the embedded field f's type, which must be
// a pointer to a struct that implements api.Recipe.
func recipeOf(f reflect.StructField) api.Recipe {
	if f.Type.Kind() != reflect.Pointer || f.Type.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("registry: embedded field %s is not a pointer to a struct", f.Type))
	}
	r, ok := reflect.New(f.Type.Elem()).Interface().(api.Recipe)
	if !ok {
		panic(fmt.Sprintf("registry: %s does not implement api.Recipe (Tokens() []string and Setup(api.Env) api.Descriptor)", f.Type))
	}
	return r
}

// TokenKinds are the token kinds of every recipe embedded in Server, in field
// order: what a tokens file's allow entries may name. They are known without
// a session (api.Recipe.Tokens is called on zero values).
func TokenKinds() tokens.Kinds { return tokenKinds(reflect.TypeFor[Server]()) }

func tokenKinds(t reflect.Type) tokens.Kinds {
	var kinds tokens.Kinds
	for i := 1; i < t.NumField(); i++ {
		if f := t.Field(i); f.Anonymous {
			kinds = append(kinds, recipeOf(f).Tokens()...)
		}
	}
	return kinds
}

// Flags are the flags of every recipe embedded in Server that has its own
// (api.Flagged), in field order: the sidecar adds them to its command line.
// They are known without a session (api.Flagged.Flags is called on zero
// values). Two recipes declaring one flag panic.
func Flags() []api.Flag { return flagsOf(reflect.TypeFor[Server]()) }

func flagsOf(t reflect.Type) []api.Flag {
	var all []api.Flag
	owners := map[string]string{}
	for i := 1; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.Anonymous {
			continue
		}
		fl, ok := recipeOf(f).(api.Flagged)
		if !ok {
			continue
		}
		for _, flag := range fl.Flags() {
			if other, dup := owners[flag.Name]; dup {
				panic(fmt.Sprintf("registry: flag --%s is declared by both %s and %s", flag.Name, other, f.Type))
			}
			owners[flag.Name] = f.Type.String()
			all = append(all, flag)
		}
	}
	return all
}

// flagValues are the values of r's own flags: each one's in given, else its
// default; nil when r has none.
func flagValues(r api.Recipe, given map[string]string) map[string]string {
	fl, ok := r.(api.Flagged)
	if !ok {
		return nil
	}
	values := map[string]string{}
	for _, f := range fl.Flags() {
		values[f.Name] = f.Default
		if v, set := given[f.Name]; set {
			values[f.Name] = v
		}
	}
	return values
}

// Adoptions are how a successor takes over every recipe's holds, by hold
// kind: the sidecar registers them with its kit.Leases before a restart's
// resume begins.
func (s *Server) Adoptions() map[string]kit.Adoption {
	all := map[string]kit.Adoption{}
	for _, r := range s.recipes {
		for kind, a := range r.d.Adoptions {
			all[kind] = a
		}
	}
	return all
}

// CloseRecipes ends what the recipes run in the background (their
// Descriptor.Close, in field order). Call it once the session is closed and
// the leases have ended.
func (s *Server) CloseRecipes() {
	for _, r := range s.recipes {
		if r.d.Close != nil {
			r.d.Close()
		}
	}
}

// Handler returns the whole HTTP surface (api.Server.Handler over every
// operation).
func (s *Server) Handler() http.Handler { return s.Server.Handler(s) }
