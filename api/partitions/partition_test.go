package partitions_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A member takes what the plan deals it once the previous owner lets it go:
// the moved partitions stay with their owner until it acks, and the new owner
// gets a higher fencing token.
func TestPartitionsHandover(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a := sidecartest.Start(t, zkc.Servers(), root)
	b := sidecartest.Start(t, zkc.Servers(), root)
	const g = "orders"
	b.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/"+g, `{"count":6}`)
	w1 := sidecartest.DecodeAs[sidecartest.PMember](t, a.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/"+g+"/members?id=w1&ttl=30s", "").Raw)
	if len(w1.Owned) != 6 || w1.Lease == "" {
		t.Fatalf("w1 alone: %+v", w1)
	}
	lease1 := w1.Lease
	tokens := w1.OwnedTokens()
	w2 := sidecartest.DecodeAs[sidecartest.PMember](t, b.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/"+g+"/members?id=w2&ttl=30s", "").Raw)
	if len(w2.Assigned) != 3 || len(w2.Owned) != 0 {
		t.Fatalf("w2 must be dealt 3 and own none until w1 acks: %+v", w2)
	}
	// w1 sees its new plan and still owns all six.
	r := a.Must(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/partitions/%s/members/w1?version=%d&wait=5s", g, w1.Version))
	w1 = sidecartest.DecodeAs[sidecartest.PMember](t, r.Raw)
	if len(w1.Assigned) != 3 || len(w1.Owned) != 6 {
		t.Fatalf("w1 before its ack: %+v", w1)
	}
	// A version not of its current plan is refused, nothing changes.
	r = a.Must(t, http.StatusConflict, http.MethodPost, fmt.Sprintf("/v1/partitions/%s/members/w1/ack?version=%d&lease=%s", g, w1.Version+1000, lease1))
	if r.Body["type"] != "https://coord-sidecar.dev/problems/version-mismatch" || sidecartest.Num(r.Body["version"]) != w1.Version {
		t.Fatalf("bad ack: %s", r.Raw)
	}
	// w2 long-polls; the ack hands three over.
	polled := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := b.Do(context.Background(), http.MethodGet, fmt.Sprintf("/v1/partitions/%s/members/w2?version=%d&wait=20s", g, w2.Version), nil)
		polled <- r
	}()
	r = a.Must(t, http.StatusOK, http.MethodPost, fmt.Sprintf("/v1/partitions/%s/members/w1/ack?version=%d&lease=%s", g, w1.Version, lease1))
	w1 = sidecartest.DecodeAs[sidecartest.PMember](t, r.Raw)
	if len(w1.Owned) != 3 || !slices.Equal(w1.Assigned, keys(w1.OwnedTokens())) {
		t.Fatalf("w1 after its ack: %+v", w1)
	}
	select {
	case r := <-polled:
		if r == nil || r.Status != http.StatusOK {
			t.Fatalf("long-poll: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("w2's long-poll did not answer")
	}
	gs := sidecartest.AwaitSettled(t, b, g, 2, 5*time.Second)
	if gs.Leader == nil || *gs.Leader != "w1" {
		t.Fatalf("leader: %+v", gs)
	}
	r = b.Must(t, http.StatusOK, http.MethodGet, "/v1/partitions/"+g+"/members/w2")
	w2 = sidecartest.DecodeAs[sidecartest.PMember](t, r.Raw)
	for p, tok := range w2.OwnedTokens() {
		if tok <= tokens[p] {
			t.Fatalf("partition %s: new owner's token %d not above %d", p, tok, tokens[p])
		}
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/partitions/"+g+"/members/w1?lease="+lease1)
	sidecartest.AwaitSettled(t, b, g, 1, 5*time.Second)
	if l := b.Must(t, http.StatusOK, http.MethodGet, "/v1/partitions?prefix=ord"); len(l.Body["groups"].([]any)) != 1 {
		t.Fatalf("list: %s", l.Raw)
	}
}

func keys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j] })
	return out
}

// A member whose sidecar loses its ZooKeeper session loses its partitions and is
// told so: its long-poll answers 503 while the session is cut, its lease's stream
// reports `lost-hold` once the session could have expired, and afterwards the member is gone and the partitions pass to a
// member on another sidecar with higher tokens.
func TestPartitionMemberToldOfLostSession(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	proxy, cut, other := sidecartest.CutOffPair(t, zkc, "2s")
	const g = "lost"
	other.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/"+g, `{"count":4}`)
	lease := sidecartest.Str(cut.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	w1 := sidecartest.DecodeAs[sidecartest.PMember](t, cut.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/"+g+"/members?id=w1&lease="+lease, "").Raw)
	if len(w1.Owned) != 4 {
		t.Fatalf("w1 alone: %+v", w1)
	}
	before := w1.OwnedTokens()
	leaseEvents := sidecartest.FollowEvents(t, cut, "/v1/leases/"+lease+"/events")
	leaseEvents.AwaitEvent(t, 5*time.Second, "lease", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lease" })
	polled := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := cut.Do(context.Background(), http.MethodGet, fmt.Sprintf("/v1/partitions/%s/members/w1?version=%d&wait=30s", g, w1.Version), nil)
		polled <- r
	}()

	proxy.Cut()
	select {
	case r := <-polled:
		if r == nil || r.Status != http.StatusServiceUnavailable {
			t.Fatalf("w1's long-poll during the cut: %+v, want 503", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("w1's long-poll was not told of the cut within 10s")
	}
	// Reported lost once the session could have expired; back on the network
	// (the same session, or a new one if ZooKeeper expired it meanwhile), the
	// member's nodes are gone either way.
	leaseEvents.AwaitEvent(t, 20*time.Second, "lost-hold", func(ev sidecartest.TimedEvent) bool { return ev.Name == "lost-hold" })
	proxy.Restore()

	w2 := sidecartest.DecodeAs[sidecartest.PMember](t, other.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/"+g+"/members?id=w2&ttl=60s", "").Raw)
	testutil.Eventually(t, 10*time.Second, "w2 owns all four", func() bool {
		w2 = sidecartest.DecodeAs[sidecartest.PMember](t, other.Must(t, http.StatusOK, http.MethodGet, "/v1/partitions/"+g+"/members/w2").Raw)
		return len(w2.Owned) == 4
	})
	for p, tok := range w2.OwnedTokens() {
		if tok <= before[p] {
			t.Fatalf("partition %s: new token %d not above the lost member's %d", p, tok, before[p])
		}
	}
	testutil.Eventually(t, 10*time.Second, "w1 is gone", func() bool {
		r, err := cut.Do(context.Background(), http.MethodGet, "/v1/partitions/"+g+"/members/w1", nil)
		return err == nil && r.Status == http.StatusNotFound
	})
}
