package groups_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Members are listed in join order with their values, on every sidecar; a
// long-poll answers at the next change; the stream carries every change; a
// revoked lease's member is gone at once; Curator-shaped member nodes placed
// with go-zookeeper are members too.
func TestGroupMembership(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	const g = "workers"
	st := b.OpenStream(t, "/v1/groups/"+g+"/events")
	var lastID int64
	sidecartest.AwaitGroup(t, st, &lastID, "", 5*time.Second)

	l1 := sidecartest.Str(a.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/"+g+"/members?id=w1&ttl=30s", `{"value":"10.0.0.1:80"}`).Body["lease"])
	l2 := sidecartest.Str(b.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/"+g+"/members?id=w2&ttl=30s", `{"value":"10.0.0.2:80"}`).Body["lease"])
	r := a.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/"+g+"/members?id=w3&ttl=30s", `{"value":"c"}`)
	l3 := sidecartest.Str(r.Body["lease"])
	sidecartest.AwaitGroup(t, st, &lastID, "w1=10.0.0.1:80 w2=10.0.0.2:80 w3=c", 5*time.Second)
	b.Send(t, http.StatusConflict, http.MethodPost, "/v1/groups/"+g+"/members?id=w1&ttl=30s", `{"value":"x"}`)
	a.Send(t, http.StatusConflict, http.MethodPost, "/v1/groups/"+g+"/members?id=w1&ttl=30s", `{"value":"10.0.0.1:80"}`)

	for _, car := range []*sidecartest.Sidecar{a, b} {
		got := car.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/"+g)
		if s := sidecartest.GroupSummary(got.Body); s != "w1=10.0.0.1:80 w2=10.0.0.2:80 w3=c" {
			t.Fatalf("GET group: %s", got.Raw)
		}
	}
	version := sidecartest.Num(a.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/"+g).Body["version"])

	// A long-poll on the current version answers at the next change: a new value.
	type answer struct {
		r   *sidecartest.Response
		err error
	}
	polled := make(chan answer, 1)
	go func() {
		r, err := b.Do(context.Background(), http.MethodGet, fmt.Sprintf("/v1/groups/%s?version=%d&wait=20s", g, version), nil)
		polled <- answer{r, err}
	}()
	a.Send(t, http.StatusOK, http.MethodPut, "/v1/groups/"+g+"/members/w3?lease="+l3, `{"value":"c2"}`)
	select {
	case p := <-polled:
		if p.err != nil || p.r.Status != http.StatusOK || sidecartest.GroupSummary(p.r.Body) != "w1=10.0.0.1:80 w2=10.0.0.2:80 w3=c2" {
			t.Fatalf("long-poll: %v %+v", p.err, p.r)
		}
		if v := sidecartest.Num(p.r.Body["version"]); v <= version {
			t.Fatalf("version %d after %d", v, version)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not answer the change")
	}
	sidecartest.AwaitGroup(t, st, &lastID, "w1=10.0.0.1:80 w2=10.0.0.2:80 w3=c2", 5*time.Second)
	// An unchanged long-poll answers 200 unchanged when wait ends.
	now := sidecartest.Num(a.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/"+g).Body["version"])
	if r := a.Must(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/groups/%s?version=%d&wait=200ms", g, now)); sidecartest.Num(r.Body["version"]) != now {
		t.Fatalf("unchanged long-poll: %s", r.Raw)
	}

	// A revoked lease's member is gone at once (well before any timeout).
	start := time.Now()
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+l1)
	sidecartest.AwaitGroup(t, st, &lastID, "w2=10.0.0.2:80 w3=c2", 2*time.Second)
	t.Logf("a revoked member vanished from another sidecar's stream in %s", time.Since(start).Round(time.Millisecond))

	// Curator GroupMember's layout: an ephemeral groups/{group}/{id} holding the value.
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	if _, err := conn.Create(root+"/groups/"+g+"/curator-1", []byte("from curator"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	sidecartest.AwaitGroup(t, st, &lastID, "w2=10.0.0.2:80 w3=c2 curator-1=from curator", 5*time.Second)
	a.Send(t, http.StatusConflict, http.MethodPost, "/v1/groups/"+g+"/members?id=curator-1", `{}`)
	// And a sidecar member is a Curator member: the node is where Curator looks.
	if data, _, err := conn.Get(root + "/groups/" + g + "/w2"); err != nil || string(data) != "10.0.0.2:80" {
		t.Fatalf("w2's node: %q %v", data, err)
	}

	// Leave; an unknown lease and a lease that holds no such member are 404.
	b.Must(t, http.StatusNotFound, http.MethodDelete, "/v1/groups/"+g+"/members/w2?lease=nosuch")
	b.Must(t, http.StatusNotFound, http.MethodDelete, "/v1/groups/"+g+"/members/w3?lease="+l2)
	b.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/groups/"+g+"/members/w2?lease="+l2)
	sidecartest.AwaitGroup(t, st, &lastID, "w3=c2 curator-1=from curator", 5*time.Second)

	list := a.Must(t, http.StatusOK, http.MethodGet, "/v1/groups?prefix=work")
	if gs, _ := list.Body["groups"].([]any); len(gs) != 1 {
		t.Fatalf("list: %s", list.Raw)
	}
}

// A killed sidecar's members vanish once its session times out.
func TestGroupKilledSidecar(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	p, cmd := sidecartest.StartKillable(t, zkc.Server(0), root)

	const g = "killed"
	st := a.OpenStream(t, "/v1/groups/"+g+"/events")
	var lastID int64
	a.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/"+g+"/members?id=a1", `{"value":"a"}`)
	p.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/"+g+"/members?id=p1", `{"value":"p"}`)
	p.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/"+g+"/members?id=p2", `{"value":"p"}`)
	sidecartest.AwaitGroup(t, st, &lastID, "a1=a p1=p p2=p", 5*time.Second)

	start := time.Now()
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	sidecartest.AwaitGroup(t, st, &lastID, "a1=a", 10*time.Second)
	took := time.Since(start)
	t.Logf("the killed sidecar's members vanished %s after SIGKILL (session timeout 1s)", took.Round(time.Millisecond))
	if took < 900*time.Millisecond {
		t.Fatalf("members vanished after %s, before the session timeout", took)
	}
	testutil.Eventually(t, 5*time.Second, "GET agrees", func() bool {
		return sidecartest.GroupSummary(a.Must(t, http.StatusOK, http.MethodGet, "/v1/groups/"+g).Body) == "a1=a"
	})
}
