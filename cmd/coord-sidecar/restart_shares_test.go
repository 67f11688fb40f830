package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// A sidecar killed with SIGKILL and started again on the same --state-dir keeps
// what one lease of it holds of the sharing kinds, checked after the old
// process's session timeout has passed:
//
//   - two throughput memberships, one leading its group and one not: the same
//     leader, version and shares, and no other allocation or leader on another
//     sidecar's streams; the successor sidecartest.Leads again (an update of its member is
//     allocated) and, released, the member's share passes to the other member;
//   - a partition membership (its group's leader): the same owned partitions
//     with the same fencing tokens, the same group version, and no move on the
//     other member's sidecar's stream; released through the successor, its
//     partitions pass to the other member (its owner nodes are let go with it);
//   - a queue claim: acked through the successor under the same claim id, and
//     never delivered to the claim waiting on another sidecar meanwhile (which
//     gets the next item).
//
// None of these kinds leaves a waiting node (throughput and partition joins do
// not wait; a waiting claim polls), so there is nothing to sweep. On a 3-node
// ensemble.
func TestRestartKeepsSharesPartitionsAndClaims(t *testing.T) {
	r, a, b, lease := restartOnEnsemble(t)
	s := &sharesScene{a: a, b: b, lease: lease}
	s.joinThroughput(t)
	s.joinPartitions(t)
	s.claimJob(t)
	s.ledEvents = sidecartest.FollowEvents(t, s.b, "/v1/throughput/tp-led/events")
	s.followsEvents = sidecartest.FollowEvents(t, s.b, "/v1/throughput/tp-follows/events")
	s.partsEvents = sidecartest.FollowEvents(t, s.b, "/v1/partitions/parts/events")
	testutil.Eventually(t, 10*time.Second, "the lease and its holds saved", func() bool {
		st := r.savedState(t)
		return strings.Contains(st, s.lease) && strings.Contains(st, `"kind":"throughput"`) &&
			strings.Contains(st, `"kind":"partitions"`) && strings.Contains(st, `"kind":"claim"`)
	})

	s.a, _ = r.restartPastTimeout(t)

	s.checkLease(t)
	s.checkThroughput(t)
	s.checkPartitions(t)
	s.checkClaim(t)
	s.passOn(t)
}

// sharesScene is TestRestartKeepsSharesPartitionsAndClaims's two sidecars (a
// is restarted) and what was seen before the kill.
type sharesScene struct {
	a, b  *sidecartest.Sidecar
	lease string // a's, holding one thing of each kind

	led, follows     sidecartest.TPGroup // a's member sidecartest.Leads tp-led; b's sidecartest.Leads tp-follows
	parts            sidecartest.PGroup  // a's pa sidecartest.Leads; b's pb is the other member
	paOwned, pbOwned map[string]int64
	claim            string                     // a's claim of job-1
	delivered        chan *sidecartest.Response // b's claim on the same queue, waiting

	// b's streams of tp-led, tp-follows and parts.
	ledEvents, followsEvents, partsEvents *sidecartest.EventLog
}

// joinThroughput makes tp-led, led by a's member a1, and tp-follows, led by
// b's member b2, each with a member of the other sidecar.
func (s *sharesScene) joinThroughput(t *testing.T) {
	a, b := s.a, s.b
	b.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/tp-led", `{"limit":1000}`)
	b.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/tp-follows", `{"limit":600}`)
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/tp-led/members?id=a1&lease="+s.lease)
	b.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/tp-led/members?id=b1&ttl=60s")
	b.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/tp-follows/members?id=b2&ttl=60s")
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/tp-follows/members?id=a2&weight=2&lease="+s.lease)
	s.led = awaitTP(t, b, "tp-led", "1000: a1*=500 b1=500")
	s.follows = awaitTP(t, b, "tp-follows", "600: b2*=200 a2=400")
}

// joinPartitions makes parts, 4 partitions, led by a's member pa, which acks
// the plan that deals b's pb its half.
func (s *sharesScene) joinPartitions(t *testing.T) {
	a, b := s.a, s.b
	b.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/parts", `{"count":4}`)
	pa := sidecartest.DecodeAs[sidecartest.PMember](t, a.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/parts/members?id=pa&lease="+s.lease, "").Raw)
	if len(pa.Owned) != 4 {
		t.Fatalf("pa alone: %+v", pa)
	}
	b.Send(t, http.StatusCreated, http.MethodPost, "/v1/partitions/parts/members?id=pb&ttl=60s", "")
	pa = sidecartest.DecodeAs[sidecartest.PMember](t, a.Must(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/partitions/parts/members/pa?version=%d&wait=5s", pa.Version)).Raw)
	a.Must(t, http.StatusOK, http.MethodPost, fmt.Sprintf("/v1/partitions/parts/members/pa/ack?version=%d&lease=%s", pa.Version, s.lease))
	s.parts = sidecartest.AwaitSettled(t, b, "parts", 2, 10*time.Second)
	s.paOwned = partMember(t, b, "pa").OwnedTokens()
	s.pbOwned = partMember(t, b, "pb").OwnedTokens()
	if s.parts.Leader == nil || *s.parts.Leader != "pa" || len(s.paOwned) != 2 || len(s.pbOwned) != 2 {
		t.Fatalf("partitions before the kill: %+v, pa owns %v, pb owns %v; want pa leading, 2 each", s.parts, s.paOwned, s.pbOwned)
	}
}

// claimJob has a claim job-1 of queue jobs while b's claim on jobs waits.
func (s *sharesScene) claimJob(t *testing.T) {
	s.b.PutItem(t, "jobs", "job-1")
	c, err := s.a.Do(context.Background(), http.MethodPost, "/v1/queues/jobs/claims?lease="+s.lease, nil)
	if err != nil || c.Status != http.StatusOK || string(c.Raw) != "job-1" {
		t.Fatalf("claim: %v %+v", err, c)
	}
	s.claim = c.Header.Get("Claim-Id")
	s.delivered = make(chan *sidecartest.Response, 1)
	go func() {
		resp, err := s.b.FaultCall(2*time.Minute, http.MethodPost, "/v1/queues/jobs/claims?wait=100s&ttl=60s")
		if err != nil {
			resp = &sidecartest.Response{Status: -1, Raw: []byte(err.Error())}
		}
		s.delivered <- resp
	}()
}

// checkLease checks that the resumed lease lists every hold.
func (s *sharesScene) checkLease(t *testing.T) {
	detail := string(s.a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+s.lease).Raw)
	for _, h := range []string{
		`"kind":"throughput","name":"tp-led/a1"`, `"kind":"throughput","name":"tp-follows/a2"`,
		`"kind":"partitions","name":"parts/pa"`, `"kind":"claim","name":"jobs/` + s.claim + `"`,
	} {
		if !strings.Contains(detail, h) {
			t.Fatalf("the resumed lease %s: %s; want it holding %s", s.lease, detail, h)
		}
	}
}

// checkThroughput checks that nothing moved, on b's reads and streams.
func (s *sharesScene) checkThroughput(t *testing.T) {
	for _, before := range []sidecartest.TPGroup{s.led, s.follows} {
		if now := sidecartest.DecodeTP(t, s.b.Must(t, http.StatusOK, http.MethodGet, "/v1/throughput/"+before.Group).Raw); now.Summary() != before.Summary() || now.Version != before.Version {
			t.Fatalf("after the restart %s is %s version %d; want %s version %d", before.Group, now.Summary(), now.Version, before.Summary(), before.Version)
		}
	}
	checkTPEvents(t, s.ledEvents, s.led)
	checkTPEvents(t, s.followsEvents, s.follows)
}

// checkPartitions checks the same owners with the same tokens, the same
// version, and no change on b's stream.
func (s *sharesScene) checkPartitions(t *testing.T) {
	if now := sidecartest.AwaitSettled(t, s.b, "parts", 2, 10*time.Second); now.Version != s.parts.Version || now.Leader == nil || *now.Leader != "pa" {
		t.Fatalf("after the restart the group is %+v; want version %d led by pa", now, s.parts.Version)
	}
	if got := partMember(t, s.b, "pa").OwnedTokens(); fmt.Sprint(got) != fmt.Sprint(s.paOwned) {
		t.Fatalf("after the restart pa owns %v; want %v", got, s.paOwned)
	}
	for _, ev := range s.partsEvents.Events() {
		if raw, _ := json.Marshal(ev.Data); ev.Name != "partitions" || sidecartest.DecodeAs[sidecartest.PGroup](t, raw).Version != s.parts.Version {
			t.Fatalf("the other member's stream showed a change: %s %s", ev.Name, raw)
		}
	}
}

// checkClaim checks that the item is still hidden and b was given nothing.
func (s *sharesScene) checkClaim(t *testing.T) {
	if q := s.b.Must(t, http.StatusOK, http.MethodGet, "/v1/queues/jobs").Body; sidecartest.Num(q["length"]) != 0 || sidecartest.Num(q["claimed"]) != 1 {
		t.Fatalf("after the restart the queue is %v; want its item claimed", q)
	}
	select {
	case resp := <-s.delivered:
		t.Fatalf("the claimed item was delivered to another claim: %d %s", resp.Status, resp.Raw)
	default:
	}
}

// passOn works through the successor: a sidecartest.Leads tp-led again (an update is
// allocated), the claim is acked, and what a lets go passes on.
func (s *sharesScene) passOn(t *testing.T) {
	a, b := s.a, s.b
	sh := a.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/tp-led/members/a1?lease="+s.lease, `{"demand":300}`).Body
	if sidecartest.Num(sh["share"]) != 300 || sidecartest.Num(sh["version"]) != s.led.Version+1 {
		t.Fatalf("a1's update through the successor answered %v; want share 300 in version %d", sh, s.led.Version+1)
	}
	awaitTP(t, b, "tp-led", "1000: a1*=300 b1=700")
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/queues/jobs/claims/"+s.claim)
	b.PutItem(t, "jobs", "job-2")
	if resp := <-s.delivered; resp.Status != http.StatusOK || string(resp.Raw) != "job-2" {
		t.Fatalf("the other sidecar's claim got %d %s; want job-2 (job-1 was acked)", resp.Status, resp.Raw)
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/partitions/parts/members/pa?lease="+s.lease)
	sidecartest.AwaitSettled(t, b, "parts", 1, 10*time.Second)
	pb := partMember(t, b, "pb").OwnedTokens()
	for p, tok := range pb {
		if before, kept := s.pbOwned[p]; kept && tok != before || !kept && tok <= s.paOwned[p] {
			t.Fatalf("pb owns %v after pa left; want its own %v kept and pa's %v with higher tokens", pb, s.pbOwned, s.paOwned)
		}
	}
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/throughput/tp-led/members/a1?lease="+s.lease)
	a.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/throughput/tp-follows/members/a2?lease="+s.lease)
	awaitTP(t, b, "tp-led", "1000: b1*=1000")
	awaitTP(t, b, "tp-follows", "600: b2*=600")
}

// awaitTP waits until car reads group's allocation as want (sidecartest.TPGroup.summary).
func awaitTP(t testing.TB, car *sidecartest.Sidecar, group, want string) sidecartest.TPGroup {
	t.Helper()
	var g sidecartest.TPGroup
	testutil.Eventually(t, 10*time.Second, "throughput group "+group+" at "+want, func() bool {
		r, err := car.Do(context.Background(), http.MethodGet, "/v1/throughput/"+group, nil)
		if err != nil || r.Status != http.StatusOK {
			return false
		}
		g = sidecartest.DecodeTP(t, r.Raw)
		return g.Summary() == want
	})
	return g
}

// checkTPEvents fails t unless every event of events shows the allocation want
// and its leader.
func checkTPEvents(t testing.TB, events *sidecartest.EventLog, want sidecartest.TPGroup) {
	t.Helper()
	for _, ev := range events.Events() {
		raw, _ := json.Marshal(ev.Data)
		switch ev.Name {
		case "leader":
			if sidecartest.Str(ev.Data["leader"]) != *want.Leader {
				t.Fatalf("%s: the other sidecar's stream showed leader %s; want %s throughout", want.Group, raw, *want.Leader)
			}
		case "throughput":
			if g := sidecartest.DecodeTP(t, raw); g.Summary() != want.Summary() || g.Version != want.Version {
				t.Fatalf("%s: the other sidecar's stream showed %s version %d; want %s version %d throughout", want.Group, g.Summary(), g.Version, want.Summary(), want.Version)
			}
		default:
			t.Fatalf("%s: unexpected event %s %s", want.Group, ev.Name, raw)
		}
	}
}

// partMember reads member id of partition group "parts" through car.
func partMember(t testing.TB, car *sidecartest.Sidecar, id string) sidecartest.PMember {
	t.Helper()
	return sidecartest.DecodeAs[sidecartest.PMember](t, car.Must(t, http.StatusOK, http.MethodGet, "/v1/partitions/parts/members/"+id).Raw)
}
