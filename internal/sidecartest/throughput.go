package sidecartest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TPGroup is the body of GET /v1/throughput/{group} and of `throughput` events.
type TPGroup struct {
	Group   string  `json:"group"`
	Limit   int64   `json:"limit"`
	Leader  *string `json:"leader"`
	Version int64   `json:"version"`
	Members []struct {
		ID     string `json:"id"`
		Weight int    `json:"weight"`
		Share  int64  `json:"share"`
		Leader bool   `json:"leader"`
		Demand *int64 `json:"demand"`
	} `json:"members"`
}

// Summary renders an allocation as "1000: m1*=500 m2=500" (the leader starred).
func (g TPGroup) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d:", g.Limit)
	for _, m := range g.Members {
		star := ""
		if m.Leader {
			star = "*"
		}
		fmt.Fprintf(&b, " %s%s=%d", m.ID, star, m.Share)
	}
	return b.String()
}

// Check asserts what must hold of every allocation anyone sees: the shares sum
// to the limit, the leader is the first member and the one flagged.
func (g TPGroup) Check() error {
	if len(g.Members) == 0 {
		if g.Leader != nil {
			return fmt.Errorf("leader %q without members", *g.Leader)
		}
		return nil
	}
	var sum int64
	for i, m := range g.Members {
		sum += m.Share
		if m.Leader != (i == 0) {
			return fmt.Errorf("member %d (%s) leader=%v", i, m.ID, m.Leader)
		}
	}
	if sum != g.Limit {
		return fmt.Errorf("shares sum to %d, limit %d: %s", sum, g.Limit, g.Summary())
	}
	if g.Leader == nil || *g.Leader != g.Members[0].ID {
		return fmt.Errorf("leader %v is not the first member: %s", g.Leader, g.Summary())
	}
	return nil
}

func DecodeTP(t testing.TB, raw []byte) TPGroup {
	t.Helper()
	var g TPGroup
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatalf("bad group %s: %v", raw, err)
	}
	return g
}

// TPFollower reads one throughput stream and checks every event on the way:
// each allocation is whole (Check), versions strictly increase, and so do the
// event ids, both kinds together.
type TPFollower struct {
	St          *Stream
	lastVersion int64
	lastID      int64 // id of the last event of either kind
	Leaders     []string
}

func FollowTP(t testing.TB, car *Sidecar, group string) *TPFollower {
	return &TPFollower{St: car.OpenStream(t, "/v1/throughput/"+group+"/events"), lastVersion: -1, lastID: -1}
}

// Await reads events until an allocation whose Summary is want arrives.
func (f *TPFollower) Await(t testing.TB, want string, within time.Duration) TPGroup {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := f.St.Next(t, time.Until(deadline))
		raw, _ := json.Marshal(ev.Data)
		if id := MustInt(t, ev.ID); id <= f.lastID {
			t.Fatalf("%s event id %d after %d", ev.Name, id, f.lastID)
		} else {
			f.lastID = id
		}
		switch ev.Name {
		case "leader":
			f.Leaders = append(f.Leaders, Str(ev.Data["leader"]))
		case "throughput":
			g := DecodeTP(t, raw)
			if err := g.Check(); err != nil {
				t.Fatalf("torn allocation on the stream: %v (%s)", err, raw)
			}
			if g.Version <= f.lastVersion {
				t.Fatalf("version %d (id %s) after %d", g.Version, ev.ID, f.lastVersion)
			}
			f.lastVersion = g.Version
			if g.Summary() == want {
				return g
			}
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
}

// TPMembership is one member as its client knows it.
type TPMembership struct {
	Car   *Sidecar
	Lease string
}

// JoinTP makes a lease of its own on car and joins id to group under it.
func JoinTP(t *testing.T, car *Sidecar, group, id, query string) TPMembership {
	t.Helper()
	lease := Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	r := car.Must(t, http.StatusCreated, http.MethodPost, fmt.Sprintf("/v1/throughput/%s/members?id=%s&lease=%s&%s", group, id, lease, query))
	if Str(r.Body["id"]) != id || Str(r.Body["group"]) != group || Str(r.Body["lease"]) != lease {
		t.Fatalf("join answer %s", r.Raw)
	}
	return TPMembership{Car: car, Lease: lease}
}

// AwaitShare long-polls a member's share on its own sidecar until it is want.
func AwaitShare(t *testing.T, car *Sidecar, group, id string, want int64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	r := car.Must(t, http.StatusOK, http.MethodGet, "/v1/throughput/"+group+"/members/"+id)
	for Num(r.Body["share"]) != want {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("member %s: share %d, want %d (%s)", id, Num(r.Body["share"]), want, r.Raw)
		}
		r = car.Must(t, http.StatusOK, http.MethodGet, fmt.Sprintf("/v1/throughput/%s/members/%s?version=%d&wait=%dms",
			group, id, Num(r.Body["version"]), left.Milliseconds()+1))
	}
}

// CheckStep asserts that every subscriber, every member's GET on its own
// sidecar and GET of the group on every sidecar show the allocation want.
func CheckStep(t *testing.T, step, want string, group string, subs []*TPFollower, members map[string]TPMembership, cars ...*Sidecar) {
	t.Helper()
	start := time.Now()
	for _, s := range subs {
		s.Await(t, want, 10*time.Second)
	}
	shares := map[string]int64{}
	for _, f := range strings.Fields(want)[1:] {
		id, share, _ := strings.Cut(f, "=")
		var n int64
		fmt.Sscan(share, &n)
		shares[strings.TrimSuffix(id, "*")] = n
	}
	for id, m := range members {
		AwaitShare(t, m.Car, group, id, shares[id], 10*time.Second)
	}
	for _, car := range cars {
		g := DecodeTP(t, car.Must(t, http.StatusOK, http.MethodGet, "/v1/throughput/"+group).Raw)
		if err := g.Check(); err != nil || g.Summary() != want {
			t.Fatalf("%s: GET on %s: %s (%v), want %s", step, car.Base, g.Summary(), err, want)
		}
	}
	t.Logf("%-22s %-34s seen everywhere in %s", step, want, time.Since(start).Round(time.Millisecond))
}
