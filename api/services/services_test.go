package services_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

func TestMain(m *testing.M) { os.Exit(zktest.Main(m)) }

// instances is "id=address:port id=..." of a service body, in its order.
func instances(body map[string]any) string {
	list, _ := body["instances"].([]any)
	parts := make([]string, 0, len(list))
	for _, v := range list {
		in, _ := v.(map[string]any)
		s := sidecartest.Str(in["id"]) + "=" + sidecartest.Str(in["address"])
		if p, ok := in["port"].(float64); ok {
			s += ":" + jsonOf(p)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

func jsonOf(v any) string { b, _ := json.Marshal(v); return string(b) }

// awaitService reads a service stream until a state whose instances are want;
// event ids strictly increase on the way.
func awaitService(t *testing.T, st *sidecartest.Stream, last *int64, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(testutil.Patience(10 * time.Second))
	for {
		ev := st.Next(t, time.Until(deadline))
		if ev.Name != "service" {
			t.Fatalf("unexpected event %+v", ev)
		}
		id := sidecartest.Num(json.Number(ev.ID))
		if ev.ID == "" || id <= *last && *last != 0 {
			t.Fatalf("service event id %q after %d", ev.ID, *last)
		}
		*last = id
		if instances(ev.Data) == want {
			return ev.Data
		}
	}
}

const path = "/v1/services/web"

// The whole recipe over HTTP on two sidecars: register (201) and update in
// place (200), another lease's id refused (409), the read on every sidecar
// with a long-poll, the stream first with the current state then every change,
// picks, the list, unregister (204, then 404), and a revoked lease's instance
// gone.
func TestServicesOverHTTP(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)

	st := b.OpenStream(t, path+"/events")
	var last int64
	awaitService(t, st, &last, "")
	sidecartest.ProblemIs(t, a.Must(t, http.StatusNotFound, http.MethodGet, path+"/pick"), http.StatusNotFound, "no-instances")

	r := a.Send(t, http.StatusCreated, http.MethodPut, path+"/instances/i1?ttl=30s",
		`{"address":"10.0.0.1","port":8080,"payload":{"zone":"a","n":9007199254740993},"uriSpec":"{scheme}://{address}:{port}"}`)
	l1 := sidecartest.Str(r.Body["lease"])
	if r.Body["service"] != "web" || r.Body["id"] != "i1" || l1 == "" || r.Body["address"] != "10.0.0.1" ||
		r.Body["enabled"] != true || r.Body["uriSpec"] != "{scheme}://{address}:{port}" || r.Body["registeredAt"] == nil {
		t.Fatalf("register answered %s", r.Raw)
	}
	if !strings.Contains(string(r.Raw), `"payload":{"zone":"a","n":9007199254740993}`) {
		t.Fatalf("the payload is not kept exactly: %s", r.Raw)
	}
	lease2 := sidecartest.Str(b.Send(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30s", "").Body["lease"])
	b.Send(t, http.StatusCreated, http.MethodPut, path+"/instances/i2?lease="+lease2, `{"address":"10.0.0.2","port":8081,"sslPort":8443}`)
	awaitService(t, st, &last, "i1=10.0.0.1:8080 i2=10.0.0.2:8081")

	// The same lease again: an update in place, the registration time kept.
	up := b.Send(t, http.StatusOK, http.MethodPut, path+"/instances/i2?lease="+lease2, `{"address":"10.0.0.3","port":8082}`)
	if up.Body["lease"] != lease2 || up.Body["address"] != "10.0.0.3" {
		t.Fatalf("update answered %s", up.Raw)
	}
	awaitService(t, st, &last, "i1=10.0.0.1:8080 i2=10.0.0.3:8082")
	// Another lease's id, on either sidecar: 409, nothing changed.
	for _, car := range []*sidecartest.Sidecar{a, b} {
		sidecartest.ProblemIs(t, car.Send(t, http.StatusConflict, http.MethodPut, path+"/instances/i1?ttl=30s", `{"address":"x"}`),
			http.StatusConflict, "instance-exists")
	}
	version := int64(0)
	for _, car := range []*sidecartest.Sidecar{a, b} {
		got := car.Must(t, http.StatusOK, http.MethodGet, path)
		if instances(got.Body) != "i1=10.0.0.1:8080 i2=10.0.0.3:8082" {
			t.Fatalf("GET on %s: %s", car.Base, got.Raw)
		}
		version = sidecartest.Num(got.Body["version"])
	}

	// A long-poll on the current version answers at the next change.
	done := make(chan *sidecartest.Response, 1)
	go func() {
		r, err := a.Do(context.Background(), http.MethodGet, path+"?version="+jsonOf(version)+"&wait=30s", nil)
		if err != nil {
			t.Error(err)
		}
		done <- r
	}()
	b.Send(t, http.StatusCreated, http.MethodPut, path+"/instances/i3?ttl=30s", `{"address":"10.0.0.4"}`)
	if lp := <-done; lp == nil || lp.Status != http.StatusOK || sidecartest.Num(lp.Body["version"]) == version {
		t.Fatalf("long-poll answered %+v", lp)
	}
	awaitService(t, st, &last, "i1=10.0.0.1:8080 i2=10.0.0.3:8082 i3=10.0.0.4")

	picksListAndRevoke(t, a, b, st, &last, l1, lease2)
}

// picksListAndRevoke goes on from TestServicesOverHTTP's three instances (i1
// on a with its implicit lease l1, i2 on b with lease2, i3): picks, the list,
// unregister, and the revoke of l1.
func picksListAndRevoke(t *testing.T, a, b *sidecartest.Sidecar, st *sidecartest.Stream, last *int64, l1, lease2 string) {
	t.Helper()
	// Picks: round-robin goes through all three.
	testutil.Eventually(t, 10*time.Second, "round-robin visits every instance", func() bool {
		seen := map[string]bool{}
		for range 3 {
			p := a.Must(t, http.StatusOK, http.MethodGet, path+"/pick?strategy=round-robin")
			seen[sidecartest.Str(p.Body["id"])] = true
		}
		return len(seen) == 3
	})
	first := sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, path+"/pick?strategy=sticky").Body["id"])
	for range 5 {
		if id := sidecartest.Str(a.Must(t, http.StatusOK, http.MethodGet, path+"/pick?strategy=sticky").Body["id"]); id != first {
			t.Fatalf("sticky moved from %s to %s", first, id)
		}
	}
	if p := a.Must(t, http.StatusOK, http.MethodGet, path+"/pick"); p.Body["address"] == nil || p.Body["registeredAt"] == nil {
		t.Fatalf("pick answered %s", p.Raw)
	}

	// The list.
	a.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/api/instances/x?ttl=30s", `{"address":"h"}`)
	list := a.Must(t, http.StatusOK, http.MethodGet, "/v1/services?limit=1")
	items, _ := list.Body["services"].([]any)
	if len(items) != 1 || list.Body["next"] != "api" || items[0].(map[string]any)["service"] != "api" {
		t.Fatalf("list page: %s", list.Raw)
	}
	list = a.Must(t, http.StatusOK, http.MethodGet, "/v1/services?after=api")
	items, _ = list.Body["services"].([]any)
	if len(items) != 1 || instances(items[0].(map[string]any)) != "i1=10.0.0.1:8080 i2=10.0.0.3:8082 i3=10.0.0.4" {
		t.Fatalf("list after api: %s", list.Raw)
	}

	// Unregister, then again: 404; a revoked lease's instance goes at once.
	b.Must(t, http.StatusNoContent, http.MethodDelete, path+"/instances/i2?lease="+lease2)
	sidecartest.ProblemIs(t, b.Must(t, http.StatusNotFound, http.MethodDelete, path+"/instances/i2?lease="+lease2), http.StatusNotFound, "not-held")
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+l1)
	awaitService(t, st, last, "i3=10.0.0.4")
	if got := a.Must(t, http.StatusOK, http.MethodGet, path); instances(got.Body) != "i3=10.0.0.4" {
		t.Fatalf("after the revoke: %s", got.Raw)
	}
}

// Bad input is a 400 that touches nothing: no address, a port out of range,
// an unknown field, a bad uriSpec, a bad strategy, an invalid name; ttl= and
// lease= together.
func TestServicesBadInput(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	for body, problem := range map[string]string{
		`{}`:                             "invalid-body",
		`{"address":""}`:                 "invalid-body",
		`{"address":"a","port":70000}`:   "invalid-body",
		`{"address":"a","port":"80"}`:    "invalid-body",
		`{"address":"a","uriSpec":"{x"}`: "invalid-body",
		`{"address":"a","adress":"b"}`:   "unknown-parameter",
	} {
		r := a.Send(t, http.StatusBadRequest, http.MethodPut, path+"/instances/i?ttl=30s", body)
		sidecartest.ProblemIs(t, r, http.StatusBadRequest, problem)
	}
	sidecartest.ProblemIs(t, a.Send(t, http.StatusBadRequest, http.MethodPut, "/v1/services/a..b/instances/-i?ttl=30s", `{"address":"a"}`),
		http.StatusBadRequest, "invalid-name")
	sidecartest.ProblemIs(t, a.Must(t, http.StatusBadRequest, http.MethodGet, path+"/pick?strategy=fastest"), http.StatusBadRequest, "invalid-parameter")
	sidecartest.ProblemIs(t, a.Must(t, http.StatusBadRequest, http.MethodGet, path+"/pick?stratgy=random"), http.StatusBadRequest, "unknown-parameter")
	sidecartest.ProblemIs(t, a.Send(t, http.StatusNotFound, http.MethodPut, path+"/instances/i?lease=nope", `{"address":"a"}`), http.StatusNotFound, "lease-not-found")
	if got := a.Must(t, http.StatusOK, http.MethodGet, "/v1/services"); !strings.Contains(string(got.Raw), `"services":[]`) {
		t.Fatalf("bad input left services: %s", got.Raw)
	}
}

// The services are in the whole picture (/v1/events, event `service`), and a
// token scoped to services/web-* sees and touches only those.
func TestServicesInThePictureAndTokens(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	file := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(file, []byte(`{"tokens":[{"name":"all","token":"token-for-all-0123","allow":["*"]},{"name":"web","token":"token-for-web-0123","allow":["services/web-*"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	car := sidecartest.Start(t, zkc.Servers(), root, "--tokens-file", file)
	all, web := car.As(sidecartest.Bearer("token-for-all-0123")...), car.As(sidecartest.Bearer("token-for-web-0123")...)
	web.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/web-a/instances/i?ttl=30s", `{"address":"a"}`)
	sidecartest.ProblemIs(t, web.Send(t, http.StatusForbidden, http.MethodPut, "/v1/services/api/instances/i?ttl=30s", `{"address":"a"}`), http.StatusForbidden, "forbidden")
	all.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/api/instances/i?ttl=30s", `{"address":"b"}`)

	seen := func(s *sidecartest.Sidecar, want map[string]string) {
		t.Helper()
		st := s.OpenStream(t, "/v1/events")
		defer st.Cancel()
		got := map[string]string{}
		deadline := time.Now().Add(testutil.Patience(10 * time.Second))
		for len(got) < len(want) {
			ev := st.Next(t, time.Until(deadline))
			if ev.Name == "service" {
				got[sidecartest.Str(ev.Data["service"])] = instances(ev.Data)
			}
		}
		if jsonOf(got) != jsonOf(want) {
			t.Fatalf("the picture shows %v, want %v", got, want)
		}
	}
	seen(all, map[string]string{"web-a": "i=a", "api": "i=b"})
	seen(web, map[string]string{"web-a": "i=a"})
	list := web.Must(t, http.StatusOK, http.MethodGet, "/v1/services")
	if items, _ := list.Body["services"].([]any); len(items) != 1 {
		t.Fatalf("the scoped token lists %s", list.Raw)
	}
}

// --services-base moves the base path: the instance node is there, as a
// Curator ServiceDiscovery with that base path expects it.
func TestServicesBaseFlag(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	base := root + "-curator/services"
	car := sidecartest.Start(t, zkc.Servers(), root, "--services-base", base)
	car.Send(t, http.StatusCreated, http.MethodPut, path+"/instances/i1?ttl=30s", `{"address":"h","port":1}`)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	data, _, err := conn.Get(base + "/web/i1")
	if err != nil {
		t.Fatalf("no instance node under the base path: %v", err)
	}
	var in map[string]any
	if err := json.Unmarshal(data, &in); err != nil || in["serviceType"] != "DYNAMIC" || in["name"] != "web" {
		t.Fatalf("node data %s (%v)", data, err)
	}
	if ok, _, _ := conn.Exists(root + "/services/web"); ok {
		t.Fatal("the instance was made under <root>/services too")
	}
	// And the picture follows the moved directory.
	st := car.OpenStream(t, "/v1/events")
	defer st.Cancel()
	deadline := time.Now().Add(testutil.Patience(10 * time.Second))
	for {
		ev := st.Next(t, time.Until(deadline))
		if ev.Name == "service" && instances(ev.Data) == "i1=h:1" {
			break
		}
	}
}

// --services-base is a flag of the sidecar's like the others though only
// this recipe declares it: read from COORD_SERVICES_BASE too, listed by
// --help, and a value that is no absolute znode path stops the start.
func TestServicesBaseFlagParses(t *testing.T) {
	m := sidecar.NewMain()
	if err := m.ParseFlags(nil, func(k string) string { return map[string]string{"COORD_SERVICES_BASE": "/services"}[k] }); err != nil {
		t.Fatal(err)
	}
	if got := m.Config.RecipeFlags["services-base"]; got != "/services" {
		t.Fatalf("COORD_SERVICES_BASE=/services gave %q", got)
	}
	if err := sidecar.NewMain().ParseFlags([]string{"--services-base", "/services"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"services", "/services/", "/"} {
		err := sidecar.NewMain().ParseFlags([]string{"--services-base", bad}, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), "--services-base") {
			t.Errorf("--services-base %q: %v, want refused", bad, err)
		}
	}
	var help strings.Builder
	m = sidecar.NewMain()
	m.Stdout = &help
	_ = m.ParseFlags([]string{"-h"}, func(string) string { return "" })
	if !strings.Contains(help.String(), "-services-base") || !strings.Contains(help.String(), "(COORD_SERVICES_BASE)") {
		t.Fatalf("--help does not list --services-base:\n%s", help.String())
	}
}
