package locks_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// curatorRecipesJars are the class path of testdata/CuratorMultiLock.java:
// Debian's libcurator-recipes-java and what it depends on.
var curatorRecipesJars = []string{
	"curator-recipes.jar", "curator-framework.jar", "curator-client.jar", "zookeeper.jar", "zookeeper-jute.jar?",
	"guava.jar", "slf4j-api.jar", "slf4j-nop.jar?",
}

// A Curator InterProcessMultiLock over the sidecar's lock paths and the
// sidecar's multi-lock exclude each other both ways: while Curator holds a
// and b, the sidecar's multi-lock of b and c is refused, and one that waits
// is granted once Curator releases; while the sidecar holds them, Curator's
// times out, and gets them after the sidecar's release.
func TestMultiLockExcludesCuratorsMultiLock(t *testing.T) {
	t.Parallel()
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	curator := sidecartest.StartJavaPeer(t, "libcurator-recipes-java", curatorRecipesJars, "testdata/CuratorMultiLock.java", zkc.Servers()[0], root)

	if got := curator.Do("acquire cm-a,cm-b 30000"); got != "acquired" {
		t.Fatalf("Curator's first multi-lock: %s", got)
	}
	p := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/multilocks?names=cm-b,cm-c&ttl=30s")
	sidecartest.ProblemIs(t, p, http.StatusConflict, "lock-held")
	if p.Body["name"] != "cm-b" {
		t.Fatalf("409 names %v, want cm-b (Curator's)", p.Body["name"])
	}
	got := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/multilocks?names=cm-b,cm-c&wait=60s&ttl=30s&owner=sidecar", nil)
		got <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the sidecar waits behind Curator", func() bool {
		return sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/cm-b").Body["waiters"]) == 1
	})
	select {
	case r := <-got:
		t.Fatalf("granted while Curator holds cm-b: %v", r)
	default:
	}
	curator.Do("release")
	r := <-got
	if r == nil || r.Status != http.StatusCreated {
		t.Fatalf("after Curator's release: %v", r)
	}

	// The other way round: Curator cannot take cm-a and cm-c while the
	// sidecar holds cm-c, and takes them once it is released.
	if got := curator.Do("acquire cm-a,cm-c 500"); got != "timeout" {
		t.Fatalf("Curator's multi-lock beside the sidecar's: %s", got)
	}
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/multilocks?names=cm-b,cm-c&lease="+sidecartest.Str(r.Body["lease"]))
	if got := curator.Do("acquire cm-a,cm-c 30000"); got != "acquired" {
		t.Fatalf("Curator's multi-lock after the sidecar's release: %s", got)
	}
	if h, _ := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/cm-a").Body["holder"].(map[string]any); h == nil {
		t.Fatal("the sidecar does not see Curator holding cm-a")
	}
	curator.Do("release")
}
