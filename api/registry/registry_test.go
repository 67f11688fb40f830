package registry

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/api"
	"github.com/coord-sidecar/coord-sidecar/api/locks"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// options are api.Options on a session of the shared ZooKeeper and its leases.
func options(t *testing.T) api.Options {
	t.Helper()
	sess := zookeepertest.NewSession(t, zktest.Shared(t).Servers(), zktest.Root(t))
	leases := kit.NewLeases(sess, nil)
	t.Cleanup(leases.Close)
	return api.Options{Session: sess, Leases: leases}
}

// newServer is the registry's Server on a session of the shared ZooKeeper.
func newServer(t *testing.T) *Server {
	t.Helper()
	s := New(options(t))
	t.Cleanup(s.Close)
	return s
}

// Every kind embedded in Server is set up and registers a descriptor, and
// what the descriptors name is unique across them: token kinds, topic kinds,
// sections and hold kinds; each section's token kind is one of its recipe's.
// The token kinds known without a session are the ones registered, in the
// order the tokens file's errors list them.
func TestEveryKindRegisters(t *testing.T) {
	s := newServer(t)
	v := reflect.ValueOf(s).Elem()
	embedded := 0
	for i := 1; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		if !f.Anonymous {
			continue
		}
		embedded++
		if v.Field(i).IsNil() {
			t.Errorf("%s was not set up", f.Type)
		}
	}
	if len(s.recipes) != embedded || embedded < 12 {
		t.Fatalf("%d descriptors registered for %d embedded kinds", len(s.recipes), embedded)
	}
	u := &uniques{t: t, seen: map[string]map[string]string{}}
	var want []string // the token kinds of the recipes as set up, in field order
	for i, r := range s.recipes {
		tokens := v.Field(i + 1).Interface().(api.Recipe).Tokens()
		u.check(r, tokens)
		want = append(want, tokens...)
	}
	for _, k := range []string{"locks", "rwlocks", "semaphores", "elections", "barriers", "double-barriers",
		"queues", "throughput", "kv", "counters", "groups", "partitions"} {
		if !slices.Contains(want, k) {
			t.Errorf("no recipe has the token kind %q", k)
		}
	}
	if got := TokenKinds(); !slices.Equal(got, want) {
		t.Errorf("TokenKinds() = %v, want %v", got, want)
	}
	if got := s.Server.TokenKinds(); !slices.Equal(got, want) {
		t.Errorf("the server registered the token kinds %v, want %v", got, want)
	}
	if got := len(s.Server.Sections()); got != len(u.seen["section"]) || got != len(want) {
		t.Errorf("the server shows %d sections; the descriptors give %d", got, len(u.seen["section"]))
	}
	if got := len(s.Adoptions()); got != len(u.seen["hold kind"]) || got < 11 {
		t.Errorf("%d adoptions; the descriptors give %d", got, len(u.seen["hold kind"]))
	}
}

// uniques checks that no two recipes name the same thing.
type uniques struct {
	t    *testing.T
	seen map[string]map[string]string // what -> name -> the recipe naming it
}

func (u *uniques) add(what, name, owner string) {
	u.t.Helper()
	if u.seen[what] == nil {
		u.seen[what] = map[string]string{}
	}
	if other, dup := u.seen[what][name]; dup {
		u.t.Errorf("%s %q is named by both %s and %s", what, name, other, owner)
	}
	u.seen[what][name] = owner
}

// check adds what recipe r (whose token kinds are tokens) names, and checks
// its sections and adoptions are whole.
func (u *uniques) check(r described, tokens []string) {
	u.t.Helper()
	for _, k := range tokens {
		u.add("token kind", k, r.name)
	}
	for k := range r.d.Topics {
		u.add("topic kind", k, r.name)
	}
	for _, sec := range r.d.Sections {
		u.add("section", sec.Name, r.name)
		if !slices.Contains(tokens, sec.Token) {
			u.t.Errorf("%s: section %q names token kind %q, not one of %v", r.name, sec.Name, sec.Token, tokens)
		}
		if sec.Follow == nil || sec.Event == "" || sec.Dir == "" || sec.Field == "" {
			u.t.Errorf("%s: section %q is incomplete: %+v", r.name, sec.Name, sec)
		}
	}
	for k, a := range r.d.Adoptions {
		u.add("hold kind", k, r.name)
		if a.Adopt == nil {
			u.t.Errorf("%s: hold kind %q has no Adopt", r.name, k)
		}
	}
}

// notARecipe is a type embedded by mistake: it has no Setup.
type notARecipe struct{}

func (*notARecipe) Tokens() []string { return []string{"nothing"} }

// A kind without Setup stops the sidecar at once, with its type named, both
// when the token kinds are read and when the server is put together.
func TestKindWithoutSetupPanics(t *testing.T) {
	type broken struct {
		*api.Server
		*notARecipe
	}
	expectPanic(t, "notARecipe does not implement api.Recipe", func() { tokenKinds(reflect.TypeFor[broken]()) })
	var b broken
	expectPanic(t, "notARecipe does not implement api.Recipe", func() { setUp(reflect.ValueOf(&b).Elem(), api.Env{}, nil) })
}

// twinLocks claims the token kind of the locks.
type twinLocks struct{}

func (*twinLocks) Tokens() []string             { return []string{"locks"} }
func (*twinLocks) Setup(api.Env) api.Descriptor { return api.Descriptor{} }

// twinHolds claims the hold kind of the locks.
type twinHolds struct{}

func (*twinHolds) Tokens() []string { return nil }
func (*twinHolds) Setup(api.Env) api.Descriptor {
	return api.Descriptor{Adoptions: map[string]kit.Adoption{"lock": {}}}
}

// Two kinds naming the same token kind or hold kind stop the sidecar at once.
func TestDuplicateKindsPanic(t *testing.T) {
	opt := options(t)
	env := func() api.Env {
		srv := api.NewServer(opt)
		t.Cleanup(srv.Close)
		return api.Env{Server: srv, Session: opt.Session, Leases: opt.Leases}
	}
	var tokens struct {
		*api.Server
		*locks.Locks
		*twinLocks
	}
	expectPanic(t, "token kind locks registered twice", func() { setUp(reflect.ValueOf(&tokens).Elem(), env(), nil) })
	var holds struct {
		*api.Server
		*locks.Locks
		*twinHolds
	}
	expectPanic(t, `hold kind "lock" is adopted by both *locks.Locks and *registry.twinHolds`, func() { setUp(reflect.ValueOf(&holds).Elem(), env(), nil) })
}

// Widgets is a recipe with flags of its own; it keeps the values its Setup
// was given in setUpWith.
type Widgets struct{}

var setUpWith map[string]string

func (*Widgets) Tokens() []string { return []string{"widgets"} }
func (*Widgets) Flags() []api.Flag {
	return []api.Flag{{Name: "widgets-base", Default: "/w"}, {Name: "widgets-mode", Default: "slow"}}
}
func (*Widgets) Setup(env api.Env) api.Descriptor {
	setUpWith = env.Flags
	return api.Descriptor{}
}

// TwinWidgets declares a flag of the widgets.
type TwinWidgets struct{}

func (*TwinWidgets) Tokens() []string             { return nil }
func (*TwinWidgets) Flags() []api.Flag            { return []api.Flag{{Name: "widgets-mode"}} }
func (*TwinWidgets) Setup(api.Env) api.Descriptor { return api.Descriptor{} }

// A recipe's own flags are collected without a session, in field order, and
// its Setup gets their values: each one given, else its default; a recipe
// without flags gets none. Two recipes declaring one flag stop the sidecar
// at once.
func TestRecipeFlags(t *testing.T) {
	type withFlags struct {
		*api.Server
		*locks.Locks
		*Widgets
	}
	flags := flagsOf(reflect.TypeFor[withFlags]())
	if len(flags) != 2 || flags[0].Name != "widgets-base" || flags[1].Name != "widgets-mode" {
		t.Fatalf("flags %+v", flags)
	}
	opt := options(t)
	srv := api.NewServer(opt)
	t.Cleanup(srv.Close)
	var w withFlags
	setUp(reflect.ValueOf(&w).Elem(), api.Env{Server: srv, Session: opt.Session, Leases: opt.Leases}, map[string]string{"widgets-mode": "fast"})
	if len(setUpWith) != 2 || setUpWith["widgets-base"] != "/w" || setUpWith["widgets-mode"] != "fast" {
		t.Fatalf("Setup got the flags %v", setUpWith)
	}
	if flagValues(&locks.Locks{}, map[string]string{"widgets-mode": "fast"}) != nil {
		t.Fatal("a recipe without flags got values")
	}
	type twins struct {
		*api.Server
		*Widgets
		*TwinWidgets
	}
	expectPanic(t, "flag --widgets-mode is declared by both *registry.Widgets and *registry.TwinWidgets", func() { flagsOf(reflect.TypeFor[twins]()) })
	for _, f := range Flags() {
		if f.Name == "" || f.Usage == "" {
			t.Errorf("a registered recipe's flag is incomplete: %+v", f)
		}
	}
}

func expectPanic(t *testing.T, want string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		r := recover()
		if r == nil {
			t.Fatalf("no panic; want one saying %q", want)
		}
		if msg, _ := r.(string); !strings.Contains(msg, want) {
			t.Fatalf("panic %v; want one saying %q", r, want)
		}
	}()
	f()
}
