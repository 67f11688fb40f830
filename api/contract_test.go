package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// What openapi.yaml says of request bodies holds: a JSON body needs
// Content-Type application/json (415), required fields are required, the body is
// one JSON value with nothing after it, it matches its schema, and a queue item is
// not empty (400). Each answers its problem and writes nothing in ZooKeeper: not a
// node, not a byte of data.
func TestStrictInputIsRejectedWithoutTouchingZooKeeper(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	// Something of every kind the cases aim at, so that a write would show.
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/g", `{"limit":1000}`)
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/g/members?id=m1&lease="+lease)
	car.Send(t, http.StatusCreated, http.MethodPost, "/v1/elections/e/candidates?id=c1&lease="+lease, `{"value":"v"}`)
	if r, err := car.Do(context.Background(), http.MethodPost, "/v1/queues/q/items", strings.NewReader("keep"), "Content-Type", "text/plain"); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("enqueue: %v %+v", err, r)
	}
	before := dumpWithStats(t, conn, root)

	const js = "application/json"
	member := "/v1/throughput/g/members/m1?lease=" + lease
	candidate := "/v1/elections/e/candidates/c1?lease=" + lease
	cases := []struct {
		name, method, path, contentType, body string
		status                                int
		problem                               string
	}{
		// Content-Type.
		{"form-encoded limit (curl -d)", "PUT", "/v1/throughput/g", "application/x-www-form-urlencoded", `{"limit":5}`, 415, "unsupported-media-type"},
		{"limit without Content-Type", "PUT", "/v1/throughput/g", "", `{"limit":5}`, 415, "unsupported-media-type"},
		{"limit as text/plain", "PUT", "/v1/throughput/g", "text/plain", `{"limit":5}`, 415, "unsupported-media-type"},
		{"limit in another charset", "PUT", "/v1/throughput/g", "application/json; charset=latin1", `{"limit":5}`, 415, "unsupported-media-type"},
		{"form-encoded candidate", "POST", "/v1/elections/e/candidates?id=c2", "application/x-www-form-urlencoded", `{"value":"x"}`, 415, "unsupported-media-type"},
		{"form-encoded proclaim", "PUT", candidate, "application/x-www-form-urlencoded", `{"value":"x"}`, 415, "unsupported-media-type"},
		{"form-encoded member update", "PUT", member, "application/x-www-form-urlencoded", `{"weight":2}`, 415, "unsupported-media-type"},
		// Required fields and bodies.
		{"limit missing", "PUT", "/v1/throughput/g", js, `{}`, 400, "invalid-body"},
		{"limit body missing", "PUT", "/v1/throughput/g", js, ``, 400, "invalid-body"},
		{"proclaim body missing", "PUT", candidate, js, ``, 400, "invalid-body"},
		{"member update body missing", "PUT", member, js, ``, 400, "invalid-body"},
		// One JSON value, nothing after it.
		{"limit then more JSON", "PUT", "/v1/throughput/g", js, `{"limit":5}{"limit":6}`, 400, "invalid-body"},
		{"limit then garbage", "PUT", "/v1/throughput/g", js, `{"limit":5} x`, 400, "invalid-body"},
		{"candidate then more JSON", "POST", "/v1/elections/e/candidates?id=c2", js, `{"value":"x"} {}`, 400, "invalid-body"},
		{"member update then more", "PUT", member, js, `{"weight":2}]`, 400, "invalid-body"},
		{"not JSON", "PUT", "/v1/throughput/g", js, `limit=5`, 400, "invalid-body"},
		{"truncated JSON", "PUT", "/v1/throughput/g", js, `{"limit":5`, 400, "invalid-body"},
		// The schema.
		{"limit a string", "PUT", "/v1/throughput/g", js, `{"limit":"5"}`, 400, "invalid-body"},
		{"limit negative", "PUT", "/v1/throughput/g", js, `{"limit":-1}`, 400, "invalid-body"},
		{"limit not an object", "PUT", "/v1/throughput/g", js, `[5]`, 400, "invalid-body"},
		{"value a number", "PUT", candidate, js, `{"value":5}`, 400, "invalid-body"},
		{"weight 0", "PUT", member, js, `{"weight":0}`, 400, "invalid-body"},
		{"demand negative", "PUT", member, js, `{"demand":-5}`, 400, "invalid-body"},
		// Queue items: any bytes of any type, but some bytes.
		{"empty item", "POST", "/v1/queues/q/items", "text/plain", ``, 400, "invalid-body"},
		{"empty item without Content-Type", "POST", "/v1/queues/q/items", "", ``, 400, "invalid-body"},
		{"empty JSON item", "POST", "/v1/queues/q/items", js, ``, 400, "invalid-body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, err := http.NewRequest(c.method, car.Base+c.path, bytes.NewReader([]byte(c.body)))
			if err != nil {
				t.Fatal(err)
			}
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			r := decodeResponse(t, resp)
			sidecartest.ProblemIs(t, r, c.status, c.problem)
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" || sidecartest.Str(r.Body["detail"]) == "" {
				t.Fatalf("Content-Type %q, problem %s", ct, r.Raw)
			}
		})
	}
	if after := dumpWithStats(t, conn, root); !slices.Equal(before, after) {
		t.Fatalf("the ZooKeeper tree changed:\nbefore %v\nafter  %v", before, after)
	}
	// And the right requests still pass.
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/g", `{"limit":5}`)
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/g", "{\"limit\":6}\n")
	r, err := car.Do(context.Background(), http.MethodPut, "/v1/throughput/g", strings.NewReader(`{"limit":7}`), "Content-Type", "application/json; charset=UTF-8")
	if err != nil || r.Status != http.StatusOK || sidecartest.Num(r.Body["limit"]) != 7 {
		t.Fatalf("with a utf-8 charset: %v %+v", err, r)
	}
	car.Send(t, http.StatusCreated, http.MethodPost, "/v1/elections/e/candidates?id=c3", ``) // an optional body left out
}

// decodeResponse reads resp as doWith does.
func decodeResponse(t *testing.T, resp *http.Response) *sidecartest.Response {
	t.Helper()
	defer resp.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	r := &sidecartest.Response{Status: resp.StatusCode, Header: resp.Header, Raw: buf.Bytes()}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		if err := json.Unmarshal(buf.Bytes(), &r.Body); err != nil {
			t.Fatalf("bad JSON %q: %v", buf.Bytes(), err)
		}
	}
	return r
}

// dumpWithStats lists every node under root with the zxids of its last data
// change and last child change: any write under root changes the list.
func dumpWithStats(t *testing.T, conn *zk.Conn, root string) []string {
	t.Helper()
	var out []string
	var walk func(p string)
	walk = func(p string) {
		_, st, err := conn.Get(p)
		if err == zk.ErrNoNode {
			return
		}
		if err != nil {
			t.Fatalf("get %s: %v", p, err)
		}
		out = append(out, fmt.Sprintf("%s mzxid=%d pzxid=%d", p, st.Mzxid, st.Pzxid))
		children, _, err := conn.Children(p)
		if err != nil && err != zk.ErrNoNode {
			t.Fatalf("children of %s: %v", p, err)
		}
		for _, c := range children {
			walk(path.Join(p, c))
		}
	}
	walk(root)
	slices.Sort(out)
	return out
}

// An election stream's event ids strictly increase and are what openapi.yaml
// says: the zxid of the newest change the event reflects, so the first event of
// a one-candidate election has the leader's term as its id, and every event's
// id is at least its leader's term.
func TestElectionEventIDs(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	c1 := sidecartest.Campaign(t, car, "ids", "c1", "ttl=60s")
	term1 := sidecartest.Num(c1.Body["term"])

	st := car.OpenStream(t, "/v1/elections/ids/events")
	var last int64
	next := func(what string, cond func(sidecartest.Event) bool) sidecartest.Event {
		t.Helper()
		for {
			ev := st.Next(t, 10*time.Second)
			id := sidecartest.MustInt(t, ev.ID)
			if ev.Name != "leader" || id <= last {
				t.Fatalf("%s: event %s id %d after id %d", what, ev.Name, id, last)
			}
			last = id
			leader, _ := ev.Data["leader"].(map[string]any)
			if leader != nil && id < sidecartest.Num(leader["term"]) {
				t.Fatalf("%s: id %d below the leader's term %d", what, id, sidecartest.Num(leader["term"]))
			}
			if cond(ev) {
				return ev
			}
		}
	}
	lineOf := func(ev sidecartest.Event) string {
		var ids []string
		cs, _ := ev.Data["candidates"].([]any)
		for _, c := range cs {
			ids = append(ids, sidecartest.Str(c.(map[string]any)["candidate"]))
		}
		return strings.Join(ids, ",")
	}
	leaderOf := func(ev sidecartest.Event) (string, int64) {
		l, _ := ev.Data["leader"].(map[string]any)
		return sidecartest.Str(l["candidate"]), sidecartest.Num(l["term"])
	}

	first := next("first event", func(sidecartest.Event) bool { return true })
	if id := sidecartest.MustInt(t, first.ID); id != term1 {
		t.Fatalf("first event id %d, want the leader's term %d: %+v", id, term1, first)
	}
	c2 := sidecartest.Campaign(t, car, "ids", "c2", "ttl=60s")
	joined := next("c2 joins", func(ev sidecartest.Event) bool { return lineOf(ev) == "c1,c2" })
	if who, term := leaderOf(joined); who != "c1" || term != term1 || sidecartest.MustInt(t, joined.ID) <= term1 {
		t.Fatalf("after c2 joined: leader %s term %d id %s, want c1, term %d, a newer id", who, term, joined.ID, term1)
	}
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/elections/ids/candidates/c2?lease="+sidecartest.Str(c2.Body["lease"]), `{"value":"new"}`)
	next("c2 proclaims", func(ev sidecartest.Event) bool {
		cs, _ := ev.Data["candidates"].([]any)
		return len(cs) == 2 && sidecartest.Str(cs[1].(map[string]any)["value"]) == "new"
	})
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/ids/candidates/c1?lease="+sidecartest.Str(c1.Body["lease"]))
	took := next("c1 resigns", func(ev sidecartest.Event) bool { who, _ := leaderOf(ev); return who == "c2" })
	if _, term := leaderOf(took); term <= term1 || sidecartest.MustInt(t, took.ID) < term {
		t.Fatalf("c2 sidecartest.Leads with term %d (c1's was %d) at id %s", term, term1, took.ID)
	}

	// A second stream starts from the current state, with the same id.
	st2 := car.OpenStream(t, "/v1/elections/ids/events")
	if ev := st2.Next(t, 10*time.Second); ev.ID != took.ID {
		t.Fatalf("a new stream's first id %s, want the current %s", ev.ID, took.ID)
	}
}

// On a throughput stream, ids strictly increase over both kinds of events: a
// `leader` event never repeats the id of the `throughput` event before it (they
// come from one version), and a new stream gets the current two in publish order.
func TestThroughputEventIDs(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/ids", `{"limit":100}`)
	m1 := sidecartest.JoinTP(t, car, "ids", "m1", "")

	type seen struct {
		name string
		id   int64
	}
	read := func(st *sidecartest.Stream, n int) []seen {
		t.Helper()
		var out []seen
		for range n {
			ev := st.Next(t, 10*time.Second)
			out = append(out, seen{ev.Name, sidecartest.MustInt(t, ev.ID)})
		}
		return out
	}
	increasing := func(what string, evs []seen) {
		t.Helper()
		for i := 1; i < len(evs); i++ {
			if evs[i].id <= evs[i-1].id {
				t.Fatalf("%s: ids do not increase: %v", what, evs)
			}
		}
	}

	f := sidecartest.FollowTP(t, car, "ids")
	all := read(f.St, 2) // the current allocation and leader
	if all[0].name != "throughput" || all[1].name != "leader" {
		t.Fatalf("first events %v, want throughput then leader", all)
	}
	sidecartest.JoinTP(t, car, "ids", "m2", "")
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+m1.Lease) // m1 goes: m2 sidecartest.Leads
	for all[len(all)-1].name != "leader" {                                       // until m2's leader event
		all = append(all, read(f.St, 1)...)
	}
	increasing("the whole stream", all)
	if prev := all[len(all)-2]; prev.name != "throughput" {
		t.Fatalf("the new leader's event follows its allocation: %v", all)
	}

	// A later stream: the leader event was published before the last allocation,
	// so it comes first, and ids still increase.
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/ids", `{"limit":200}`)
	read(f.St, 1)
	g := read(sidecartest.FollowTP(t, car, "ids").St, 2)
	increasing("a new stream's first events", g)
	if g[0].name != "leader" || g[1].name != "throughput" {
		t.Fatalf("a new stream's first events %v, want leader then throughput", g)
	}
}

// A second follower of /v1/events gets every entity's current state in the
// order it was published, so its ids strictly increase from the first event on
// (they were once in name order and went backwards).
func TestOverviewIDsIncreaseForEveryFollower(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	// Names and kinds whose order by key ("barrier/…" < "election/…" < "lock/…")
	// is not the order the overview reads them (locks, elections, ..., barriers).
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/zz?ttl=60s")
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/aa?ttl=60s")
	sidecartest.Campaign(t, car, "mid", "c1", "ttl=60s")
	car.Must(t, http.StatusNoContent, http.MethodPut, "/v1/barriers/first")

	first := car.OpenStream(t, "/v1/events")
	ids := func(st *sidecartest.Stream, what string, until func(seen map[string]bool) bool) {
		t.Helper()
		seen := map[string]bool{}
		var last int64
		for !until(seen) {
			ev := st.Next(t, 10*time.Second)
			id := sidecartest.MustInt(t, ev.ID)
			if id <= last {
				t.Fatalf("%s: %s event id %d after %d", what, ev.Name, id, last)
			}
			last = id
			seen[ev.Name+"/"+sidecartest.Str(ev.Data["name"])] = true
		}
	}
	everything := func(seen map[string]bool) bool {
		return seen["lock/zz"] && seen["lock/aa"] && seen["leader/mid"] && seen["barrier/first"] && seen["session/"]
	}
	ids(first, "the first follower", everything)
	// A change after the first snapshot, so that the current states' ids are not
	// in the overview's reading order either.
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/bb?lease="+lease)
	ids(first, "the first follower", func(seen map[string]bool) bool { return seen["lock/bb"] })
	second := car.OpenStream(t, "/v1/events")
	ids(second, "the second follower", func(seen map[string]bool) bool { return everything(seen) && seen["lock/bb"] })
}

// Every event of every stream matches the schema openapi.yaml gives it: the
// session, a lease (its first and its last event), an election, a throughput
// group (both kinds), a service (its answers and its stream) and the stream
// of everything (a deletion included).
func TestStreamEventsMatchTheirSchemas(t *testing.T) {
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/l?lease="+lease)
	sidecartest.Campaign(t, car, "e", "c1", "lease="+lease)
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/g", `{"limit":10}`)
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/g/members?id=m1&lease="+lease)
	car.Must(t, http.StatusNoContent, http.MethodPut, "/v1/barriers/b")
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/double-barriers/d/participants?id=p1&count=1&lease="+lease)
	if r, err := car.Do(context.Background(), http.MethodPost, "/v1/queues/q/items", strings.NewReader("x"), "Content-Type", "text/plain"); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("enqueue: %v %+v", err, r)
	}
	sv := car.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/sv/instances/i1?lease="+lease, `{"address":"h","port":1,"payload":{"a":[1]},"uriSpec":"{scheme}://{address}"}`)
	sidecartest.CheckContractAnswer(t, spec, http.MethodPut, "/v1/services/sv/instances/i1", sv)
	sidecartest.CheckContractAnswer(t, spec, http.MethodGet, "/v1/services/sv", car.Must(t, http.StatusOK, http.MethodGet, "/v1/services/sv"))
	sidecartest.CheckContractAnswer(t, spec, http.MethodGet, "/v1/services/sv/pick", car.Must(t, http.StatusOK, http.MethodGet, "/v1/services/sv/pick"))
	sidecartest.CheckContractAnswer(t, spec, http.MethodGet, "/v1/services", car.Must(t, http.StatusOK, http.MethodGet, "/v1/services"))
	svc := car.OpenStream(t, "/v1/services/sv/events")
	sidecartest.CheckEvent(t, spec, "/v1/services/sv/events", svc.Next(t, 10*time.Second))

	paths := []string{"/v1/session/events", "/v1/leases/" + lease + "/events", "/v1/elections/e/events", "/v1/throughput/g/events", "/v1/events"}
	streams := map[string]*sidecartest.Stream{}
	for _, p := range paths {
		streams[p] = car.OpenStream(t, p)
	}
	check := func(p string, ev sidecartest.Event) {
		t.Helper()
		sidecartest.CheckEvent(t, spec, p, ev)
	}
	// The first events: the current state of each.
	check(paths[0], streams[paths[0]].Next(t, 10*time.Second))
	check(paths[1], streams[paths[1]].Next(t, 10*time.Second))
	check(paths[2], streams[paths[2]].Next(t, 10*time.Second))
	for range 2 { // throughput and leader
		check(paths[3], streams[paths[3]].Next(t, 10*time.Second))
	}
	kinds := map[string]bool{}
	for len(kinds) < 8 { // session, lock, leader, throughput, queue, barrier, double-barrier, service
		ev := streams[paths[4]].Next(t, 10*time.Second)
		check(paths[4], ev)
		kinds[ev.Name] = true
	}
	// The end of everything the lease held: its last event, and deletions.
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/barriers/b")
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	if ev := streams[paths[1]].Next(t, 10*time.Second); ev.Name != "revoked" {
		t.Fatalf("the lease's last event: %+v", ev)
	} else {
		check(paths[1], ev)
	}
	check(paths[2], streams[paths[2]].Next(t, 10*time.Second)) // nobody sidecartest.Leads
	for deleted := false; !deleted; {
		ev := streams[paths[4]].Next(t, 10*time.Second)
		check(paths[4], ev)
		deleted = ev.Name == "barrier" && ev.Data["deleted"] == true
	}
}

// The empty states answer null where something could be (a lock's holder, an
// election's leader, a read/write lock's writer, a throughput or partition
// group's leader) and empty lists where there could be members; their answers
// and events match openapi.yaml read as OpenAPI 3.0.3 (sidecartest.MatchesSchema): over
// REST, in the lists, on their own streams and on /v1/events. A lock and an
// election that were held once and are free again keep their nodes, so that
// the lists and /v1/events show them.
func TestEmptyStatesMatchTheirSchemas(t *testing.T) {
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), sidecartest.EmptyStatesSession...)
	sidecartest.CheckContractAnswer(t, spec, http.MethodPut, "/v1/partitions/p", sidecartest.MakeEmptyStates(t, car))

	isEmpty := func(what string, key string, b map[string]any) {
		t.Helper()
		if !emptyState(key, b) {
			t.Fatalf("%s: %s %v, want it empty", what, key, b)
		}
	}

	// REST: the ones above, ones that never had a node, and the lists.
	for path, key := range map[string]string{
		"/v1/locks/l": "lock/l", "/v1/locks/never": "lock/never",
		"/v1/elections/e": "leader/e", "/v1/elections/never": "leader/never",
		"/v1/rwlocks/rw": "rwlock/rw", "/v1/rwlocks/never": "rwlock/never",
		"/v1/throughput/g": "throughput/g",
		"/v1/groups/gr":    "group/gr", "/v1/groups/never": "group/never",
		"/v1/partitions/p": "partitions/p",
		"/v1/locks":        "", "/v1/elections": "", "/v1/rwlocks": "", "/v1/throughput": "", "/v1/groups": "", "/v1/partitions": "",
	} {
		r := car.Must(t, http.StatusOK, http.MethodGet, path)
		sidecartest.CheckContractAnswer(t, spec, http.MethodGet, path, r)
		if key != "" {
			isEmpty("GET "+path, key, r.Body)
		}
	}
	// A writer refused while readers hold: the problem's writer is null.
	refused := car.Must(t, http.StatusConflict, http.MethodPost, "/v1/rwlocks/rw?mode=write&ttl=60s")
	if w, ok := refused.Body["writer"]; !ok || w != nil {
		t.Fatalf("lock-held without a writer: %s", refused.Raw)
	}
	sidecartest.CheckContractAnswer(t, spec, http.MethodPost, "/v1/rwlocks/rw", refused)

	// Their streams: the first events are the current, empty, states.
	for path, keys := range map[string][]string{
		"/v1/locks/l/events":      {"lock/l"},
		"/v1/locks/never/events":  {"lock/never"},
		"/v1/elections/e/events":  {"leader/e"},
		"/v1/throughput/g/events": {"throughput/g", "leader/g"}, // an allocation, then its leader
		"/v1/groups/gr/events":    {"group/gr"},
		"/v1/partitions/p/events": {"partitions/p"},
	} {
		st := car.OpenStream(t, path)
		for _, key := range keys {
			ev := st.Next(t, 10*time.Second)
			sidecartest.CheckEvent(t, spec, path, ev)
			if sidecartest.EventKey(ev) != key {
				t.Fatalf("%s: event %s %v, want %s", path, ev.Name, ev.Data, key)
			}
			isEmpty(path, key, ev.Data)
		}
	}

	// /v1/events: every event matches, until each that has a node has shown empty.
	all := car.OpenStream(t, "/v1/events")
	want := []string{"lock/l", "leader/e", "rwlock/rw", "throughput/g", "group/gr", "partitions/p"}
	for seen := map[string]bool{}; len(seen) < len(want); {
		ev := all.Next(t, 10*time.Second)
		sidecartest.CheckEvent(t, spec, "/v1/events", ev)
		if key := sidecartest.EventKey(ev); slices.Contains(want, key) && ev.Data["deleted"] == nil && emptyState(key, ev.Data) {
			seen[key] = true
		}
	}
}

// emptyState tells whether b, an answer's body or an event's data, shows key
// (as sidecartest.EventKey names it: "lock/l") in the empty state sidecartest.MakeEmptyStates left it
// in, or, for a name that never had a node ("lock/never"), in the state of
// nothing at all.
func emptyState(key string, b map[string]any) bool {
	kind, name, _ := strings.Cut(key, "/")
	members, hasMembers := b["members"].([]any)
	noMembers := hasMembers && len(members) == 0
	switch kind {
	case "lock":
		return b["holder"] == nil
	case "leader": // an election's, or a throughput group's leader event
		return b["leader"] == nil
	case "rwlock":
		readers, _ := b["readers"].([]any)
		return b["writer"] == nil && (len(readers) == 0) == (name == "never")
	case "throughput", "partitions":
		return b["leader"] == nil && noMembers
	case "group":
		return noMembers
	}
	return false
}

// sidecartest.MatchesSchema reads nullable as OpenAPI 3.0.3 does: beside type only, so
// `nullable: true` next to `allOf: [$ref]` still refuses null (kin-openapi alone
// lets it through), a nullable schema referenced plainly admits it, a oneOf
// with one nullable alternative admits it, and what is not null is checked as
// before.
func TestMatchesSchemaReadsNullableAsOpenAPI303(t *testing.T) {
	spec, err := openapi3.NewLoader().LoadFromData([]byte(`
openapi: 3.0.3
info: { title: t, version: "1" }
paths: {}
components:
  schemas:
    Holder: { type: object, required: [owner], properties: { owner: { type: string } } }
    NullableHolder: { type: object, nullable: true, required: [owner], properties: { owner: { type: string } } }
    Old:
      type: object
      properties:
        holder: { type: object, nullable: true, allOf: [{ $ref: "#/components/schemas/Holder" }] }
    New:
      type: object
      properties:
        holder: { $ref: "#/components/schemas/NullableHolder" }
    Either:
      type: object
      properties:
        holder: { oneOf: [{ $ref: "#/components/schemas/Holder" }, { type: string, nullable: true }] }
`))
	if err != nil {
		t.Fatal(err)
	}
	schema := func(name string) *openapi3.Schema { return spec.Components.Schemas[name].Value }
	null := map[string]any{"holder": nil}
	if err := schema("Old").VisitJSON(null); err != nil {
		t.Fatalf("kin-openapi alone refuses the old form's null (the strict reading is then moot): %v", err)
	}
	if sidecartest.MatchesSchema(schema("Old"), null) == nil {
		t.Fatal("a null beside allOf: [$ref] passed")
	}
	for _, name := range []string{"New", "Either"} {
		if err := sidecartest.MatchesSchema(schema(name), null); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := sidecartest.MatchesSchema(schema(name), map[string]any{"holder": map[string]any{"owner": "a"}}); err != nil {
			t.Fatalf("%s: a holder: %v", name, err)
		}
		if sidecartest.MatchesSchema(schema(name), map[string]any{"holder": map[string]any{}}) == nil {
			t.Fatalf("%s: a holder without its owner passed", name)
		}
	}
}
