package services_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// curatorJars are the class path of testdata/CuratorPeer.java: Debian's
// libcurator-discovery-java and what it depends on (ZooKeeper's client,
// Jackson, Guava, SLF4J).
var curatorJars = []string{
	"curator-x-discovery.jar", "curator-framework.jar", "curator-client.jar", "zookeeper.jar", "zookeeper-jute.jar?",
	"jackson-core.jar", "jackson-databind.jar", "jackson-annotations.jar", "guava.jar", "slf4j-api.jar", "slf4j-nop.jar?",
}

// curatorPeer is a Curator ServiceDiscovery in a JVM of its own
// (testdata/CuratorPeer.java), driven a line at a time.
type curatorPeer struct {
	*sidecartest.JavaPeer
	t *testing.T
}

// startCurator starts the peer on servers with the ServiceDiscovery base path
// base.
func startCurator(t *testing.T, servers []string, base string) *curatorPeer {
	t.Helper()
	return &curatorPeer{sidecartest.StartJavaPeer(t, "libcurator-discovery-java", curatorJars, "testdata/CuratorPeer.java", strings.Join(servers, ","), base), t}
}

type curatorInstance struct {
	ID      string          `json:"id"`
	Address string          `json:"address"`
	Port    *int            `json:"port"`
	SSLPort *int            `json:"sslPort"`
	Enabled bool            `json:"enabled"`
	Payload json.RawMessage `json:"payload"`
	URISpec *string         `json:"uriSpec"`
}

// list is the service's instances as Curator's queryForInstances reads them.
func (p *curatorPeer) list(service string) map[string]curatorInstance {
	p.t.Helper()
	got := p.Do("list %s", service)
	var items []curatorInstance
	if err := json.Unmarshal([]byte(strings.TrimPrefix(got, "list ")), &items); err != nil {
		p.t.Fatalf("list answered %q: %v", got, err)
	}
	out := map[string]curatorInstance{}
	for _, in := range items {
		out[in.ID] = in
	}
	return out
}

// A Curator ServiceDiscovery on <root>/services and the sidecar see each
// other's instances: Curator's registration shows in the sidecar's read,
// stream and pick with its address, port, payload and uriSpec; the sidecar's
// shows in Curator's queryForInstances with its payload readable as a Map and
// its uriSpec built; neither can take the other's id; an instance whose lease
// is revoked vanishes for Curator, and one Curator unregisters vanishes for
// the sidecar.
func TestCuratorServiceDiscoverySeesTheSidecarAndBack(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	cur := startCurator(t, zkc.Servers(), root+"/services")

	st := car.OpenStream(t, path+"/events")
	var last int64
	awaitService(t, st, &last, "")

	// Curator to the sidecar.
	cur.Do("register web cur1 10.0.0.9 9090")
	ev := awaitService(t, st, &last, "cur1=10.0.0.9:9090")
	in := ev["instances"].([]any)[0].(map[string]any)
	if in["enabled"] != true || in["uriSpec"] != "{scheme}://{address}:{port}" || jsonOf(in["payload"]) != `{"@class":"java.util.HashMap","from":"curator"}` {
		t.Fatalf("Curator's instance as the sidecar shows it: %s", jsonOf(in))
	}
	if p := car.Must(t, http.StatusOK, http.MethodGet, path+"/pick"); p.Body["id"] != "cur1" {
		t.Fatalf("pick: %s", p.Raw)
	}
	sidecartest.ProblemIs(t, car.Send(t, http.StatusConflict, http.MethodPut, path+"/instances/cur1?ttl=30s", `{"address":"x"}`),
		http.StatusConflict, "instance-exists")

	// The sidecar to Curator.
	r := car.Send(t, http.StatusCreated, http.MethodPut, path+"/instances/side1?ttl=30s",
		`{"address":"10.0.0.1","port":8080,"sslPort":8443,"payload":{"zone":"a","weight":3},"uriSpec":"{scheme}://{address}:{port}/api"}`)
	lease := sidecartest.Str(r.Body["lease"])
	got := cur.list("web")
	side, ok := got["side1"]
	if !ok || len(got) != 2 {
		t.Fatalf("Curator sees %+v", got)
	}
	if side.Address != "10.0.0.1" || side.Port == nil || *side.Port != 8080 || side.SSLPort == nil || *side.SSLPort != 8443 ||
		!side.Enabled || string(side.Payload) != `{"zone":"a","weight":3}` || side.URISpec == nil || *side.URISpec != "https://10.0.0.1:8080/api" { // Curator's build: https when sslPort is set, {port} the port
		t.Fatalf("the sidecar's instance as Curator reads it: %+v (payload %s, uriSpec %q)", side, side.Payload, deref(side.URISpec))
	}
	// An update in place shows to Curator too.
	car.Send(t, http.StatusOK, http.MethodPut, path+"/instances/side1?lease="+lease, `{"address":"10.0.0.2","port":8081}`)
	if side := cur.list("web")["side1"]; side.Address != "10.0.0.2" || *side.Port != 8081 || side.SSLPort != nil {
		t.Fatalf("after the update Curator reads %+v", side)
	}

	// A revoked lease's instance vanishes for Curator.
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	testutil.Eventually(t, 30*time.Second, "the revoked lease's instance gone for Curator", func() bool {
		_, ok := cur.list("web")["side1"]
		return !ok
	})
	// Curator's unregistration vanishes for the sidecar.
	cur.Do("unregister web cur1")
	awaitService(t, st, &last, "")
	sidecartest.ProblemIs(t, car.Must(t, http.StatusNotFound, http.MethodGet, path+"/pick"), http.StatusNotFound, "no-instances")
}

// With --services-base, a Curator ServiceDiscovery on that base path (here
// outside the sidecar's root, as a team's own "/services" is) sees the
// sidecar's instance and the sidecar sees Curator's.
func TestCuratorOnTheMovedBasePath(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	base := root + "-team/services"
	car := sidecartest.Start(t, zkc.Servers(), root, "--services-base", base)
	cur := startCurator(t, zkc.Servers(), base)
	car.Send(t, http.StatusCreated, http.MethodPut, path+"/instances/side1?ttl=30s", `{"address":"h1","port":1}`)
	cur.Do("register web cur1 h2 2")
	if got := cur.list("web"); len(got) != 2 || got["side1"].Address != "h1" {
		t.Fatalf("Curator sees %+v", got)
	}
	testutil.Eventually(t, 10*time.Second, "the sidecar sees both", func() bool {
		return instances(car.Must(t, http.StatusOK, http.MethodGet, path).Body) == "side1=h1:1 cur1=h2:2"
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
