package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The list endpoints show what exists, and GET /v1/events starts with the current
// state of everything, then follows changes and deletions.
func TestListsAndEverythingStream(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	g := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/listed?owner=me")
	sidecartest.Campaign(t, car, "chosen", "c1", "ttl=60s")

	locks := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks").Body["locks"].([]any)
	if len(locks) != 1 || sidecartest.Str(locks[0].(map[string]any)["name"]) != "listed" {
		t.Fatalf("GET /v1/locks: %v", locks)
	}
	elections := car.Must(t, http.StatusOK, http.MethodGet, "/v1/elections").Body["elections"].([]any)
	if len(elections) != 1 || elections[0].(map[string]any)["leader"] == nil {
		t.Fatalf("GET /v1/elections: %v", elections)
	}
	for _, p := range []string{"/v1/barriers", "/v1/double-barriers", "/v1/queues", "/v1/throughput"} {
		car.Must(t, http.StatusOK, http.MethodGet, p)
	}

	st := car.OpenStream(t, "/v1/events")
	seen := map[string]bool{}
	for !(seen["session"] && seen["lock"] && seen["leader"]) {
		ev := st.Next(t, 5*time.Second)
		seen[ev.Name] = true
	}
	// A change and a deletion reach the stream.
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/listed?lease="+sidecartest.Str(g.Body["lease"]))
	deadline := time.Now().Add(10 * time.Second)
	for {
		ev := st.Next(t, time.Until(deadline))
		if ev.Name == "lock" && (ev.Data["deleted"] == true || ev.Data["holder"] == nil) {
			break
		}
	}
	if !strings.Contains(string(car.Must(t, http.StatusOK, http.MethodGet, "/ui/").Raw), "<html") {
		t.Fatal("GET /ui/ is not the page")
	}
}

// Lists page by name: prefix= narrows, limit= cuts, next/after= walk the rest
// without a gap or a repeat; a limit out of range is a 400.
func TestListsPage(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	var want []string
	for i := range 25 {
		name := fmt.Sprintf("page-%02d", i)
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/"+name+"?ttl=60s")
		want = append(want, name)
	}
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/other?ttl=60s")

	var got []string
	path := "/v1/locks?prefix=page-&limit=10"
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatalf("more pages than 25 names in tens need: %v", got)
		}
		r := car.Must(t, http.StatusOK, http.MethodGet, path)
		for _, l := range r.Body["locks"].([]any) {
			got = append(got, sidecartest.Str(l.(map[string]any)["name"]))
		}
		next, more := r.Body["next"].(string)
		if !more {
			break
		}
		path = "/v1/locks?prefix=page-&limit=10&after=" + next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged names:\n got %v\nwant %v", got, want)
	}
	if all := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks").Body; len(all["locks"].([]any)) != 26 || all["next"] != nil {
		t.Fatalf("default page: %v", all)
	}
	for _, bad := range []string{"limit=0", "limit=10001", "limit=x"} {
		r := car.Must(t, http.StatusBadRequest, http.MethodGet, "/v1/queues?"+bad)
		if !strings.HasSuffix(sidecartest.Str(r.Body["type"]), "invalid-parameter") {
			t.Fatalf("%s: %s", bad, r.Raw)
		}
	}
}
