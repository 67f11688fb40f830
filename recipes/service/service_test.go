package service

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
	"github.com/coord-sidecar/coord-sidecar/recipes/kit"
)

// sidecar is what one sidecar has of the services: its session, leases,
// services and metrics.
type sidecar struct {
	s        *zookeeper.Session
	leases   *kit.Leases
	services *Services
	reg      *prometheus.Registry
}

type world struct {
	t    *testing.T
	zkc  *zktest.Cluster
	root string
}

func newWorld(t *testing.T) *world {
	return &world{t: t, zkc: zktest.Shared(t), root: zktest.Root(t)}
}

// sidecar is a sidecar on a session of its own under the world's root, its
// services under base ("" for the default).
func (w *world) sidecar(base string) *sidecar {
	w.t.Helper()
	s := zookeepertest.Start(w.t, zookeeper.Config{Servers: w.zkc.Servers(), Root: w.root})
	reg := prometheus.NewRegistry()
	leases := kit.NewLeases(s, reg)
	w.t.Cleanup(leases.Close)
	v := New(s, base, reg)
	w.t.Cleanup(v.Close)
	return &sidecar{s: s, leases: leases, services: v, reg: reg}
}

func (w *world) client() *zk.Conn { return zktest.Connect(w.t, w.zkc.Servers(), 5*time.Second) }

func (w *world) service(s string) string { return w.root + "/services/" + s }

func (sc *sidecar) lease(t *testing.T, ttl time.Duration, implicit bool) *kit.Lease {
	t.Helper()
	l, err := sc.leases.Grant(ttl, implicit)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func port(p int) *int { return &p }

func (sc *sidecar) register(t *testing.T, l *kit.Lease, service, id string, spec Spec) *Registered {
	t.Helper()
	r, err := sc.services.Register(context.Background(), l, service, id, spec)
	if err != nil {
		t.Fatalf("register %s/%s: %v", service, id, err)
	}
	return r
}

func (sc *sidecar) inspect(t *testing.T, service string) *State {
	t.Helper()
	st, err := sc.services.Inspect(context.Background(), service)
	if err != nil {
		t.Fatalf("inspect %s: %v", service, err)
	}
	return st
}

func (sc *sidecar) metric(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := testutil.MetricValue(t, sc.reg, name)
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	return v
}

// summary is "id=address:port id=..." of a state's instances, in its order.
func summary(st *State) string {
	parts := make([]string, 0, len(st.Instances))
	for _, in := range st.Instances {
		s := in.ID + "=" + in.Address
		if in.Port != nil {
			s += ":" + strings.TrimSpace(string(mustJSON(*in.Port)))
		}
		if !in.Enabled {
			s += "(disabled)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

func exists(t *testing.T, conn *zk.Conn, p string) bool {
	t.Helper()
	ok, _, err := conn.Exists(p)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// The node a registration makes is Curator's ServiceInstance JSON, as its
// JsonInstanceSerializer writes it, an ephemeral node of the sidecar's
// session; an update by the same lease rewrites it in place with the same
// registration time; unregistering deletes it.
func TestRegisterWritesCuratorsServiceInstance(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar("")
	conn := w.client()
	ctx := context.Background()
	l := sc.lease(t, time.Minute, false)

	r := sc.register(t, l, "web", "i1", Spec{Address: "10.0.0.1", Port: port(8080),
		Payload: json.RawMessage(`{"zone":"a"}`), URISpec: "{scheme}://{address}:{port}"})
	if !r.Created || r.Lease != l.ID || r.Instance.Address != "10.0.0.1" || *r.Instance.Port != 8080 {
		t.Fatalf("registered %+v", r)
	}
	data, st, err := conn.Get(w.service("web") + "/i1")
	if err != nil {
		t.Fatal(err)
	}
	if st.EphemeralOwner == 0 {
		t.Fatal("the instance node is not ephemeral")
	}
	checkCuratorJSON(t, data)

	// The same lease again: an update in place.
	r2 := sc.register(t, l, "web", "i1", Spec{Address: "10.0.0.2", Port: port(9090)})
	if r2.Created || !r2.Instance.RegisteredAt.Equal(r.Instance.RegisteredAt) {
		t.Fatalf("update answered %+v (first %+v)", r2, r)
	}
	_, st2, _ := conn.Get(w.service("web") + "/i1")
	if st2.Czxid != st.Czxid {
		t.Fatal("the update made a new node")
	}
	if got := summary(sc.inspect(t, "web")); got != "i1=10.0.0.2:9090" {
		t.Fatalf("after the update: %q", got)
	}
	in := sc.inspect(t, "web").Instances[0]
	if in.Payload != nil || in.URISpec != "" || !in.RegisteredAt.Equal(r.Instance.RegisteredAt) {
		t.Fatalf("updated instance %+v", in)
	}
	if v := sc.metric(t, "coord_service_instances"); v != 1 {
		t.Fatalf("coord_service_instances %v", v)
	}
	if err := sc.services.Unregister(ctx, l, "web", "i1"); err != nil {
		t.Fatal(err)
	}
	if exists(t, conn, w.service("web")+"/i1") || sc.metric(t, "coord_service_instances") != 0 {
		t.Fatal("unregistered instance still there")
	}
	if err := sc.services.Unregister(ctx, l, "web", "i1"); !errors.Is(err, kit.ErrNotHeld) {
		t.Fatalf("second unregister: %v, want ErrNotHeld", err)
	}
}

// checkCuratorJSON checks data, the node of instance i1 of service web at
// 10.0.0.1:8080 with payload {"zone":"a"} and uriSpec
// {scheme}://{address}:{port}, field for field against what Curator's
// JsonInstanceSerializer writes.
func checkCuratorJSON(t *testing.T, data []byte) {
	t.Helper()
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"name": "web", "id": "i1", "address": "10.0.0.1", "port": 8080.0, "sslPort": nil,
		"payload": map[string]any{"zone": "a"}, "serviceType": "DYNAMIC", "enabled": true,
		"uriSpec": map[string]any{"parts": []any{
			map[string]any{"value": "scheme", "variable": true}, map[string]any{"value": "://", "variable": false},
			map[string]any{"value": "address", "variable": true}, map[string]any{"value": ":", "variable": false},
			map[string]any{"value": "port", "variable": true}}}}
	regTime := got["registrationTimeUTC"]
	delete(got, "registrationTimeUTC")
	if string(mustJSON(got)) != string(mustJSON(want)) {
		t.Fatalf("node data\n%s\nwant\n%s", mustJSON(got), mustJSON(want))
	}
	if ms, ok := regTime.(float64); !ok || time.Since(time.UnixMilli(int64(ms))) > time.Hour {
		t.Fatalf("registrationTimeUTC %v", regTime)
	}
}

// An id another lease holds (of this sidecar, of another, or a node Curator
// made) is ErrInstanceExists and changes nothing; a bad spec is refused before
// ZooKeeper.
func TestRegisterRefusesAnotherLeasesInstance(t *testing.T) {
	w := newWorld(t)
	a, b := w.sidecar(""), w.sidecar("")
	conn := w.client()
	ctx := context.Background()
	la := a.lease(t, time.Minute, false)
	a.register(t, la, "web", "i1", Spec{Address: "a"})
	for what, try := range map[string]func() error{
		"same sidecar": func() error {
			_, err := a.services.Register(ctx, a.lease(t, time.Minute, false), "web", "i1", Spec{Address: "x"})
			return err
		},
		"other sidecar": func() error {
			_, err := b.services.Register(ctx, b.lease(t, time.Minute, false), "web", "i1", Spec{Address: "x"})
			return err
		},
	} {
		if err := try(); !errors.Is(err, ErrInstanceExists) {
			t.Fatalf("%s: %v, want ErrInstanceExists", what, err)
		}
	}
	// A Curator instance (persistent here, as a plain client writes it).
	if _, err := conn.Create(w.service("web")+"/cur", []byte(`{"name":"web","id":"cur","address":"c","port":1,"sslPort":null,"payload":null,"registrationTimeUTC":1,"serviceType":"DYNAMIC","uriSpec":null}`), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := a.services.Register(ctx, la, "web", "cur", Spec{Address: "x"}); !errors.Is(err, ErrInstanceExists) {
		t.Fatalf("a Curator instance's id: %v, want ErrInstanceExists", err)
	}
	if got := summary(b.inspect(t, "web")); got != "i1=a cur=c:1" {
		t.Fatalf("instances %q", got)
	}
	for _, bad := range []Spec{{}, {Address: " "}, {Address: "a", Port: port(70000)}, {Address: "a", SSLPort: port(-1)},
		{Address: "a", URISpec: "{scheme"}, {Address: "a", URISpec: "x}"}, {Address: "a", Payload: json.RawMessage("{")}} {
		if _, err := a.services.Register(ctx, la, "web", "bad", bad); !errors.Is(err, ErrInvalidInstance) {
			t.Fatalf("spec %+v: %v, want ErrInvalidInstance", bad, err)
		}
	}
	if exists(t, conn, w.service("web")+"/bad") {
		t.Fatal("a refused spec made a node")
	}
}

// Curator's nodes are read as Curator reads them: enabled absent is true,
// enabled false is shown and never picked, data that is no instance is left
// out; instances come in registration order and the version moves with every
// change.
func TestInspectReadsCuratorNodesAndPickSkipsDisabled(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar("")
	conn := w.client()
	ctx := context.Background()
	sp := w.service("api")
	for _, p := range []string{w.root, w.root + "/services", sp} {
		if _, err := conn.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	for id, data := range map[string]string{
		"on":   `{"name":"api","id":"on","address":"h1","port":80,"sslPort":443,"payload":{"@class":"java.util.HashMap","k":"v"},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"http://","variable":false},{"value":"address","variable":true}]}}`,
		"off":  `{"name":"api","id":"off","address":"h2","port":81,"registrationTimeUTC":1,"serviceType":"DYNAMIC","enabled":false}`,
		"junk": `not json`,
	} {
		if _, err := conn.Create(sp+"/"+id, []byte(data), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatal(err)
		}
	}
	st := sc.inspect(t, "api")
	if got := summary(st); got != "on=h1:80 off=h2:81(disabled)" && got != "off=h2:81(disabled) on=h1:80" {
		t.Fatalf("instances %q", got)
	}
	for _, in := range st.Instances {
		if in.ID == "on" && (in.URISpec != "http://{address}" || *in.SSLPort != 443 || string(in.Payload) != `{"@class":"java.util.HashMap","k":"v"}` ||
			!in.RegisteredAt.Equal(time.UnixMilli(1700000000000))) {
			t.Fatalf("instance %+v", in)
		}
	}
	for _, s := range []string{Random, RoundRobin, Sticky, ""} {
		for range 5 {
			in, err := sc.services.Pick(ctx, "api", s)
			if err != nil || in.ID != "on" {
				t.Fatalf("pick %q: %+v %v", s, in, err)
			}
		}
	}
	v0 := st.Version
	sc.register(t, sc.lease(t, time.Minute, false), "api", "new", Spec{Address: "h3"})
	if st := sc.inspect(t, "api"); st.Version <= v0 || st.Instances[len(st.Instances)-1].ID != "new" {
		t.Fatalf("after a registration: version %d (was %d), %q", st.Version, v0, summary(st))
	}
}

// Picks: round-robin visits every enabled instance in turn, sticky answers the
// same one while it lives and another once it is gone, random only live ones;
// a service with none is ErrNoInstances; the picks follow the service without
// a read per pick (the follower's watches report the changes).
func TestPickStrategies(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar("")
	ctx := context.Background()
	if _, err := sc.services.Pick(ctx, "none", Random); !errors.Is(err, ErrNoInstances) {
		t.Fatalf("pick of a service never used: %v, want ErrNoInstances", err)
	}
	if _, err := sc.services.Pick(ctx, "none", "fastest"); !errors.Is(err, kit.ErrInvalidArgument) {
		t.Fatalf("unknown strategy: %v", err)
	}
	leases := map[string]*kit.Lease{}
	for _, id := range []string{"a", "b", "c"} {
		leases[id] = sc.lease(t, time.Minute, false)
		sc.register(t, leases[id], "s", id, Spec{Address: id})
	}
	testutil.Eventually(t, 10*time.Second, "the pick follower sees three instances", func() bool {
		seen := map[string]bool{}
		for range 3 {
			in, err := sc.services.Pick(ctx, "s", RoundRobin)
			if err != nil {
				t.Fatal(err)
			}
			seen[in.ID] = true
		}
		return len(seen) == 3
	})
	first, err := sc.services.Pick(ctx, "s", Sticky)
	if err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if in, err := sc.services.Pick(ctx, "s", Sticky); err != nil || in.ID != first.ID {
			t.Fatalf("sticky moved from %s to %+v %v", first.ID, in, err)
		}
	}
	if err := sc.leases.Revoke(leases[first.ID].ID); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "sticky moves off the revoked instance", func() bool {
		in, err := sc.services.Pick(ctx, "s", Sticky)
		return err == nil && in.ID != first.ID
	})
	for range 20 {
		in, err := sc.services.Pick(ctx, "s", Random)
		if err != nil || in.ID == first.ID {
			t.Fatalf("random picked %+v %v", in, err)
		}
	}
	for id, l := range leases {
		if id != first.ID {
			if err := sc.leases.Revoke(l.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.Eventually(t, 10*time.Second, "no instances left to pick", func() bool {
		_, err := sc.services.Pick(ctx, "s", Random)
		return errors.Is(err, ErrNoInstances)
	})
	if v := sc.metric(t, "coord_services_watched"); v != 2 {
		t.Fatalf("coord_services_watched %v, want 2 (the picked services' followers)", v)
	}
}

// An instance ends with its lease (revoked, expired, session lost), as a
// group member does; a node deleted by another hand is a lost hold.
func TestInstanceEndsWithItsLease(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar("")
	conn := w.client()
	sp := w.service("s")

	revoked := sc.lease(t, time.Minute, false)
	sc.register(t, revoked, "s", "revoked", Spec{Address: "a"})
	if err := sc.leases.Revoke(revoked.ID); err != nil {
		t.Fatal(err)
	}
	if exists(t, conn, sp+"/revoked") {
		t.Fatal("instance outlived its revoked lease")
	}
	expiring := sc.lease(t, 200*time.Millisecond, false)
	unpin := expiring.Pin()
	sc.register(t, expiring, "s", "expired", Spec{Address: "a"})
	unpin()
	select {
	case <-expiring.Done():
	case <-time.After(testutil.Patience(10 * time.Second)):
		t.Fatal("lease not expired")
	}
	if exists(t, conn, sp+"/expired") {
		t.Fatal("instance outlived its expired lease")
	}
	l := sc.lease(t, time.Minute, false)
	sc.register(t, l, "s", "m", Spec{Address: "a"})
	if err := conn.Delete(sp+"/m", -1); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the lease reports its instance lost", func() bool {
		lost, _ := l.LostHolds(0)
		return len(lost) == 1 && lost[0].Hold == (kit.Hold{Kind: InstanceKind, Name: "s/m"})
	})
	testutil.Eventually(t, 10*time.Second, "coord_service_instances back to 0", func() bool {
		return sc.metric(t, "coord_service_instances") == 0
	})
}

// Await answers once the version differs; Follow sees registrations of
// another sidecar.
func TestAwaitAndFollowSeeAnotherSidecar(t *testing.T) {
	w := newWorld(t)
	a, b := w.sidecar(""), w.sidecar("")
	ctx := context.Background()
	f, err := a.services.Follow("s")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The service's node comes first (a new version with no instance), then
	// the instance: Await answers each new version until the instance shows.
	done := make(chan *State, 1)
	go func() {
		var st *State
		var err error
		for v := int64(0); st == nil || len(st.Instances) == 0; v = st.Version {
			if st, err = a.services.Await(ctx, "s", v, testutil.Patience(20*time.Second)); err != nil || st.Version == v {
				t.Errorf("await from %d: %+v %v", v, st, err)
				break
			}
		}
		done <- st
	}()
	b.register(t, b.lease(t, time.Minute, false), "s", "x", Spec{Address: "hx", Port: port(1)})
	st := <-done
	if st == nil || summary(st) != "x=hx:1" || st.Version == 0 {
		t.Fatalf("await answered %+v", st)
	}
	st, ok := f.Await(ctx, testutil.Patience(10*time.Second), func(s *State) bool { return len(s.Instances) == 1 })
	if !ok || st.Version == 0 {
		t.Fatalf("follower: %+v", st)
	}
}

// --services-base moves the base path outside the root: the nodes are made
// there, listed there, and the session's ACL check names it.
func TestServicesBaseMovesTheBasePath(t *testing.T) {
	w := newWorld(t)
	base := w.root + "-curator/services"
	if err := CheckBase(base); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"services", "/", "/a/", "/a//b"} {
		if CheckBase(bad) == nil {
			t.Fatalf("base %q accepted", bad)
		}
	}
	sc := w.sidecar(base)
	conn := w.client()
	sc.register(t, sc.lease(t, time.Minute, false), "s", "i", Spec{Address: "a"})
	if !exists(t, conn, base+"/s/i") || exists(t, conn, w.service("s")) {
		t.Fatal("the instance is not under the moved base path")
	}
	names, err := sc.services.List(context.Background())
	if err != nil || len(names) != 1 || names[0] != "s" {
		t.Fatalf("list %v %v", names, err)
	}
	if sc.services.Dir() != base {
		t.Fatalf("Dir %q", sc.services.Dir())
	}
}

// After a restart that resumed the session, the saved instance is adopted as
// it is (same node, data and version for another sidecar), claimed here again,
// and unregisters as any other; a saved hold that does not name the instance's
// own node of this session is refused.
func TestAdoptKeepsTheInstanceAcrossARestart(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar("")
	other := w.sidecar("")
	conn := w.client()
	ctx := context.Background()
	sp := w.service("s")

	ep, err := sc.s.Current()
	if err != nil {
		t.Fatal(err)
	}
	data, err := encode("s", "i", Spec{Address: "h", Port: port(7)}, time.UnixMilli(1234))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ep.CreateOwned(ctx, sp+"/i", data, true); err != nil {
		t.Fatal(err)
	}
	other.register(t, other.lease(t, time.Minute, false), "s", "o", Spec{Address: "o"})
	before := other.inspect(t, "s")

	saved := kit.SavedHold{Hold: kit.Hold{Kind: InstanceKind, Name: "s/i"}, Nodes: []string{sp + "/i"}}
	sl := kit.SavedLease{ID: kit.NewID(), TTL: time.Minute, ExpiresAt: time.Now().Add(time.Minute), Holds: []kit.SavedHold{saved}}
	sc.leases.RegisterAdoption(InstanceKind, kit.Adoption{Adopt: sc.services.Adopt})
	r, err := sc.leases.Restore(ctx, ep, []kit.SavedLease{sl})
	if err != nil || r.Leases != 1 || r.Holds != 1 || len(r.Lost) != 0 {
		t.Fatalf("restore: %+v %v", r, err)
	}
	l, err := sc.leases.Get(sl.ID)
	if err != nil {
		t.Fatal(err)
	}
	after := other.inspect(t, "s")
	if summary(after) != "i=h:7 o=o" || after.Version != before.Version {
		t.Fatalf("another sidecar sees %q at %d; before %q at %d", summary(after), after.Version, summary(before), before.Version)
	}
	if _, err := sc.services.Register(ctx, sc.lease(t, time.Minute, false), "s", "i", Spec{Address: "x"}); !errors.Is(err, ErrInstanceExists) {
		t.Fatalf("register of the adopted id by another lease: %v", err)
	}
	if _, err := sc.services.Adopt(ctx, l, saved); !errors.Is(err, ErrInstanceExists) {
		t.Fatalf("second adoption: %v", err)
	}
	for what, h := range map[string]kit.SavedHold{
		"another session's node": {Hold: kit.Hold{Kind: InstanceKind, Name: "s/o"}, Nodes: []string{sp + "/o"}},
		"another node":           {Hold: kit.Hold{Kind: InstanceKind, Name: "s/i"}, Nodes: []string{sp + "/o"}},
		"no node":                {Hold: kit.Hold{Kind: InstanceKind, Name: "s/i"}},
		"a gone node":            {Hold: kit.Hold{Kind: InstanceKind, Name: "s/gone"}, Nodes: []string{sp + "/gone"}},
	} {
		if _, err := sc.services.Adopt(ctx, l, h); err == nil {
			t.Fatalf("adopted %s", what)
		}
	}
	// An update by the adopting lease keeps the registration time.
	up := sc.register(t, l, "s", "i", Spec{Address: "h2"})
	if up.Created || !up.Instance.RegisteredAt.Equal(time.UnixMilli(1234)) {
		t.Fatalf("update after adoption: %+v", up)
	}
	if err := sc.services.Unregister(ctx, l, "s", "i"); err != nil {
		t.Fatal(err)
	}
	if exists(t, conn, sp+"/i") {
		t.Fatal("the adopted instance did not go")
	}
}

// Invalid names are refused before any ZooKeeper call.
func TestInvalidNamesRefusedBeforeZooKeeper(t *testing.T) {
	w := newWorld(t)
	sc := w.sidecar("")
	ctx := context.Background()
	l := sc.lease(t, time.Minute, false)
	sc.s.Close()
	for _, n := range []string{"", "..", "-a", "a/b", strings.Repeat("a", 129)} {
		calls := map[string]error{}
		_, calls["register, service"] = sc.services.Register(ctx, l, n, "ok", Spec{Address: "a"})
		_, calls["register, id"] = sc.services.Register(ctx, l, "ok", n, Spec{Address: "a"})
		calls["unregister"] = sc.services.Unregister(ctx, l, n, "ok")
		_, calls["inspect"] = sc.services.Inspect(ctx, n)
		_, calls["follow"] = sc.services.Follow(n)
		_, calls["pick"] = sc.services.Pick(ctx, n, Random)
		for what, err := range calls {
			if !errors.Is(err, kit.ErrInvalidName) {
				t.Errorf("%s with %q: %v, want ErrInvalidName", what, n, err)
			}
		}
	}
	if n := sc.services.followers.Len(); n != 0 {
		t.Fatalf("%d followers started for invalid names", n)
	}
}
