package throughput_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The scenario of the issue: limit 1000, five members on two sidecars, each
// under a lease of its own; after every step every member's GET, GET of the
// group on both sidecars, and a subscriber on each sidecar show the same
// allocation, and no subscriber ever sees one whose shares do not sum to the limit.
func TestThroughputScenario(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	const g = "api-calls"
	subs := []*sidecartest.TPFollower{sidecartest.FollowTP(t, a, g), sidecartest.FollowTP(t, b, g)}
	for _, s := range subs {
		s.Await(t, "0:", 10*time.Second) // a group nobody made yet
	}
	r := a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g, `{"limit":1000}`)
	if got := sidecartest.DecodeTP(t, r.Raw); got.Limit != 1000 || got.Leader != nil || len(got.Members) != 0 {
		t.Fatalf("PUT limit answered %s", r.Raw)
	}
	members := map[string]sidecartest.TPMembership{}
	step := func(name, want string) { sidecartest.CheckStep(t, name, want, g, subs, members, a, b) }
	revoke := func(id string) {
		m := members[id]
		m.Car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+m.Lease)
		delete(members, id)
	}
	step("limit set", "1000:")

	members["m1"] = sidecartest.JoinTP(t, a, g, "m1", "weight=1")
	step("m1 joins", "1000: m1*=1000")
	members["m2"] = sidecartest.JoinTP(t, b, g, "m2", "")
	step("m2 joins", "1000: m1*=500 m2=500")
	members["m3"] = sidecartest.JoinTP(t, a, g, "m3", "")
	step("m3 joins", "1000: m1*=334 m2=333 m3=333")
	members["m4"] = sidecartest.JoinTP(t, b, g, "m4", "")
	step("m4 joins", "1000: m1*=250 m2=250 m3=250 m4=250")
	revoke("m1")
	step("m1's lease revoked", "1000: m2*=334 m3=333 m4=333")
	revoke("m4")
	step("m4's lease revoked", "1000: m2*=500 m3=500")
	a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g, `{"limit":500}`)
	step("limit set to 500", "500: m2*=250 m3=250")
	members["m5"] = sidecartest.JoinTP(t, b, g, "m5", "")
	step("m5 joins", "500: m2*=167 m3=167 m5=166")

	// Everyone leaves: the group is published empty, with no leader.
	for _, id := range []string{"m2", "m3", "m5"} {
		revoke(id)
	}
	step("everyone left", "500:")
	// The `leader` event follows the allocation that changed the leader.
	for _, s := range subs {
		if ev := s.St.Next(t, 5*time.Second); ev.Name != "leader" || ev.Data["leader"] != nil {
			t.Fatalf("after everyone left: %+v", ev)
		}
		if !strings.HasPrefix(strings.Join(s.Leaders, ","), ",m1,m2") {
			t.Fatalf("leader events %q", s.Leaders)
		}
	}
}

// Killing the leader's sidecar with SIGKILL hands the computation to the next
// member within the session timeout plus one tick, and the shares are recomputed.
func TestThroughputLeaderSidecarKilled(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	p, cmd := sidecartest.StartKillable(t, zkc.Server(0), root)

	const g = "killed"
	subs := []*sidecartest.TPFollower{sidecartest.FollowTP(t, a, g), sidecartest.FollowTP(t, b, g)}
	a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g, `{"limit":900}`)
	members := map[string]sidecartest.TPMembership{"m1": sidecartest.JoinTP(t, p, g, "m1", "")}
	members["m2"] = sidecartest.JoinTP(t, a, g, "m2", "")
	members["m3"] = sidecartest.JoinTP(t, b, g, "m3", "")
	sidecartest.CheckStep(t, "three members", "900: m1*=300 m2=300 m3=300", g, subs, members, a, b)
	if m := string(p.Must(t, http.StatusOK, http.MethodGet, "/metrics").Raw); !strings.Contains(m, "coord_throughput_groups_led 1\n") {
		t.Fatal("the leader's sidecar does not report coord_throughput_groups_led 1")
	}

	// The killed sidecar's session expires on the server after its timeout (1s),
	// in buckets of one tick (200ms); allow 500ms for the news to travel.
	bound := time.Second + 200*time.Millisecond + 500*time.Millisecond
	start := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	delete(members, "m1")
	for _, s := range subs {
		s.Await(t, "900: m2*=450 m3=450", bound+5*time.Second)
	}
	took := time.Since(start)
	if took > bound {
		t.Fatalf("handoff took %s, bound %s", took, bound)
	}
	t.Logf("m2 took over and recomputed %s after SIGKILL", took.Round(time.Millisecond))
	sidecartest.CheckStep(t, "after the kill", "900: m2*=450 m3=450", g, nil, members, a, b)
	if m := string(a.Must(t, http.StatusOK, http.MethodGet, "/metrics").Raw); !strings.Contains(m, "coord_throughput_groups_led 1\n") {
		t.Fatal("the new leader's sidecar does not report coord_throughput_groups_led 1")
	}
}

// Weights split by weight; demands split max-min fair, the surplus by weight.
func TestThroughputWeightsAndDemands(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)

	t.Run("weights 1:3", func(t *testing.T) {
		const g = "weights"
		subs := []*sidecartest.TPFollower{sidecartest.FollowTP(t, a, g)}
		a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g, `{"limit":1000}`)
		members := map[string]sidecartest.TPMembership{"w1": sidecartest.JoinTP(t, a, g, "w1", "weight=1")}
		members["w3"] = sidecartest.JoinTP(t, b, g, "w3", "weight=3")
		sidecartest.CheckStep(t, "weights 1:3", "1000: w1*=250 w3=750", g, subs, members, a, b)
		// Reweighing through PUT keeps the demand unlimited.
		r := b.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g+"/members/w3?lease="+members["w3"].Lease, `{"weight":1}`)
		if sidecartest.Num(r.Body["share"]) != 500 {
			t.Fatalf("PUT weight answered %s", r.Raw)
		}
		sidecartest.CheckStep(t, "weights 1:1", "1000: w1*=500 w3=500", g, subs, members, a, b)
	})
	t.Run("demands 100 and unlimited", func(t *testing.T) {
		const g = "demands"
		subs := []*sidecartest.TPFollower{sidecartest.FollowTP(t, b, g)}
		a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g, `{"limit":1000}`)
		members := map[string]sidecartest.TPMembership{"d1": sidecartest.JoinTP(t, a, g, "d1", "")}
		members["d2"] = sidecartest.JoinTP(t, b, g, "d2", "")
		sidecartest.CheckStep(t, "no demands", "1000: d1*=500 d2=500", g, subs, members, a, b)
		r := a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g+"/members/d1?lease="+members["d1"].Lease, `{"demand":100}`)
		if sidecartest.Num(r.Body["share"]) != 100 {
			t.Fatalf("PUT demand answered %s", r.Raw)
		}
		got := checkAndGet(t, a, g)
		sidecartest.CheckStep(t, "demand 100", "1000: d1*=100 d2=900", g, subs, members, a, b)
		if d := got.Members[0].Demand; d == nil || *d != 100 || got.Members[1].Demand != nil {
			t.Fatalf("demands shown: %+v", got.Members)
		}
		// Demands of 100 and 300 leave a surplus of 600, spread by weight.
		b.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g+"/members/d2?lease="+members["d2"].Lease, `{"demand":300}`)
		sidecartest.CheckStep(t, "demands 100+300", "1000: d1*=400 d2=600", g, subs, members, a, b)
		// Demand null is unlimited again.
		a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+g+"/members/d1?lease="+members["d1"].Lease, `{"demand":null}`)
		sidecartest.CheckStep(t, "d1 unlimited", "1000: d1*=700 d2=300", g, subs, members, a, b)
	})
}

func checkAndGet(t *testing.T, car *sidecartest.Sidecar, group string) sidecartest.TPGroup {
	t.Helper()
	g := sidecartest.DecodeTP(t, car.Must(t, http.StatusOK, http.MethodGet, "/v1/throughput/"+group).Raw)
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	return g
}

// A long-poll on version answers when the allocation changes, and at the end of
// wait with the same version when it does not.
func TestThroughputLongPoll(t *testing.T) {
	zkc := zktest.Shared(t)
	a := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/lp", `{"limit":10}`)
	r := a.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/lp/members?id=m1&ttl=60s")
	if sidecartest.Num(r.Body["share"]) != 10 || sidecartest.Str(r.Body["lease"]) == "" {
		t.Fatalf("join answered %s", r.Raw)
	}
	v := sidecartest.Num(r.Body["version"])
	polled := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := a.Do(context.Background(), http.MethodGet, fmt.Sprintf("/v1/throughput/lp/members/m1?version=%d&wait=30s", v), nil)
		polled <- r
	}()
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/lp/members?id=m2&ttl=60s")
	select {
	case r := <-polled:
		if r == nil || r.Status != http.StatusOK || sidecartest.Num(r.Body["share"]) != 5 || sidecartest.Num(r.Body["version"]) <= v {
			t.Fatalf("long-poll answered %+v", r)
		}
		v = sidecartest.Num(r.Body["version"])
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not answer on a new allocation")
	}
	start := time.Now()
	r = a.Must(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/throughput/lp/members/m1?version=%d&wait=300ms", v))
	if sidecartest.Num(r.Body["version"]) != v || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("unchanged long-poll answered %s after %s", r.Raw, time.Since(start))
	}
}

// A member joined with an implicit lease (ttl=) learns its lease from the join
// answer; leaving ends that lease.
func TestThroughputImplicitLease(t *testing.T) {
	zkc := zktest.Shared(t)
	a := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	r := a.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/il/members?id=m1&ttl=60s")
	lease := sidecartest.Str(r.Body["lease"])
	a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/throughput/il/members/m1?lease="+lease)
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/leases/"+lease)
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/throughput/il/members/m1")
}

// Bad input answers 400, unknown members 404, a second member with an id 409.
func TestThroughputBadInput(t *testing.T) {
	zkc := zktest.Shared(t)
	a := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	for _, c := range []struct {
		method, path, body string
		status             int
		problem            string
	}{
		{http.MethodPut, "/v1/throughput/g", `{"limit":-1}`, 400, "invalid-body"}, // below the schema's minimum
		{http.MethodPut, "/v1/throughput/g", `{"limit":"many"}`, 400, "invalid-body"},
		{http.MethodPut, "/v1/throughput/g", `nope`, 400, "invalid-body"},
		{http.MethodPut, "/v1/throughput/bad%20name", `{"limit":1}`, 400, "invalid-name"},
		{http.MethodPost, "/v1/throughput/g/members?id=m1&weight=0", ``, 400, "invalid-parameter"},
		{http.MethodPost, "/v1/throughput/g/members?id=_x", ``, 400, "invalid-name"},
		{http.MethodPost, "/v1/throughput/g/members?id=m1&lease=nosuchlease", ``, 404, "lease-not-found"},
		{http.MethodGet, "/v1/throughput/g/members/nobody", ``, 404, "member-not-found"},
		{http.MethodGet, "/v1/throughput/g/members/nobody?version=0&wait=1s", ``, 404, "member-not-found"},
		{http.MethodDelete, "/v1/throughput/g/members/nobody?lease=nosuchlease", ``, 404, "lease-not-found"},
		{http.MethodPut, "/v1/throughput/g/members/nobody?lease=nosuchlease", `{"weight":1}`, 404, "lease-not-found"},
	} {
		r := a.Send(t, c.status, c.method, c.path, c.body)
		if !strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/"+c.problem) {
			t.Errorf("%s %s %s: %s, want problem %s", c.method, c.path, c.body, r.Raw, c.problem)
		}
	}
	if n := a.M.LeaseCount(); n != 0 {
		t.Fatalf("%d implicit leases left behind by refused joins", n)
	}
	m1 := sidecartest.JoinTP(t, a, "g", "m1", "")
	other := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	for _, q := range []string{"lease=" + m1.Lease, "lease=" + other, "ttl=10s"} {
		r := a.Must(t, http.StatusConflict, http.MethodPost, "/v1/throughput/g/members?id=m1&"+q)
		if !strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/member-exists") {
			t.Fatalf("second m1 (%s): %s", q, r.Raw)
		}
	}
	// Another lease does not hold m1.
	a.Send(t, http.StatusNotFound, http.MethodPut, "/v1/throughput/g/members/m1?lease="+other, `{"weight":2}`)
	a.Must(t, http.StatusNotFound, http.MethodDelete, "/v1/throughput/g/members/m1?lease="+other)
	a.Send(t, http.StatusBadRequest, http.MethodPut, "/v1/throughput/g/members/m1?lease="+m1.Lease, `{"demand":-5}`)
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/throughput/g/members/m1?lease="+m1.Lease)
	a.Must(t, http.StatusNotFound, http.MethodDelete, "/v1/throughput/g/members/m1?lease="+m1.Lease)
	a.Must(t, http.StatusNotFound, http.MethodGet, "/v1/throughput/g/members/m1")
	// The group stays with its limit and no member; it has no limit: shares of 0.
	g := checkAndGet(t, a, "g")
	if g.Limit != 0 || g.Leader != nil || len(g.Members) != 0 || g.Version == 0 {
		t.Fatalf("group after the last member left: %+v", g)
	}
	r := a.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/g/members?id=m1&ttl=60s")
	if sidecartest.Num(r.Body["share"]) != 0 {
		t.Fatalf("share in a group without a limit: %s", r.Raw)
	}
}
