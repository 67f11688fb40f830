package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Trust boundaries (issue 12, HTTP side): ids stay with their holders, scoped
// tokens, browser protections, HTTPS and unix sockets, limits.

// runMain parses args with the environment env, runs the sidecar and closes it
// in Cleanup.
func runMain(t *testing.T, env map[string]string, args ...string) (*sidecar.Main, error) {
	t.Helper()
	m := sidecar.NewMain()
	m.LogOutput = io.Discard
	if testing.Verbose() && os.Getenv("SIDECAR_LOGS") != "" {
		m.LogOutput = os.Stderr
	}
	if err := m.ParseFlags(args, func(k string) string { return env[k] }); err != nil {
		return nil, err
	}
	if err := m.Run(context.Background()); err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, nil
}

func zkArgs(servers []string, root string) []string {
	return []string{"--zk", strings.Join(servers, ","), "--zk-root", root, "--session-timeout", "2s"}
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// --- 1. Ids stay with their holders ---------------------------------------

// The attack of the issue, against two sidecars on one ZooKeeper: entering a
// double barrier with another client's participant id, without its lease, is
// refused and shows no lease id (so nothing can revoke the victim's lease and
// take its locks); a participant with another count is refused with the
// barrier's count, and the barrier still waits for its own count.
func TestDoubleBarrierNeitherLeaksLeasesNorChangesCount(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	victimCar := sidecartest.Start(t, zkc.Servers(), root)
	attackerCar := sidecartest.Start(t, zkc.Servers(), root)

	// The victim: a lease holding a lock and a double-barrier participant.
	lease := sidecartest.Str(victimCar.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	victimCar.Must(t, http.StatusCreated, "POST", "/v1/locks/payments-db?lease="+lease)
	r := victimCar.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/batch/participants?id=p1&count=3&lease="+lease)
	sidecartest.ProblemIs(t, r, 409, "barrier-not-ready")
	if sidecartest.Str(r.Body["lease"]) != lease {
		t.Fatalf("the holder's own answer should carry its lease: %s", r.Raw)
	}
	// An implicit participant too.
	implicit := sidecartest.Str(victimCar.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/batch/participants?id=p2&count=3&ttl=60s").Body["lease"])

	for _, car := range []*sidecartest.Sidecar{victimCar, attackerCar} {
		for _, id := range []string{"p1", "p2"} {
			for _, q := range []string{"", "&ttl=30s", "&wait=100ms"} {
				r := car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/batch/participants?id="+id+"&count=3"+q)
				sidecartest.ProblemIs(t, r, 409, "participant-exists")
				if strings.Contains(string(r.Raw), lease) || strings.Contains(string(r.Raw), implicit) {
					t.Fatalf("a lease id leaked to a caller without it: %s", r.Raw)
				}
			}
		}
		// Listings and the lock's state show no lease either.
		for _, p := range []string{"/v1/double-barriers", "/v1/double-barriers/batch", "/v1/locks", "/v1/locks/payments-db", "/v1/session"} {
			if r := car.Must(t, http.StatusOK, "GET", p); strings.Contains(string(r.Raw), lease) || strings.Contains(string(r.Raw), implicit) {
				t.Fatalf("GET %s shows a lease id: %s", p, r.Raw)
			}
		}
	}
	// The lock is still the victim's: the attacker cannot take it.
	sidecartest.ProblemIs(t, attackerCar.Must(t, http.StatusConflict, "POST", "/v1/locks/payments-db"), 409, "lock-held")
	if n := sidecartest.Num(attackerCar.Must(t, http.StatusOK, "GET", "/v1/session").Body["leases"]); n != 0 {
		t.Fatalf("the attacker's refused requests left %d leases", n)
	}

	// The count: X waits for 3 (p1, p2 are in), Y posts count=1: refused with 3.
	for _, car := range []*sidecartest.Sidecar{victimCar, attackerCar} {
		r := car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/batch/participants?id=y&count=1&wait=200ms")
		sidecartest.ProblemIs(t, r, 409, "count-mismatch")
		if sidecartest.Num(r.Body["count"]) != 3 {
			t.Fatalf("count-mismatch without the barrier's count: %s", r.Raw)
		}
		// The same for a participant with its own lease: it keeps no enrolment.
		other := sidecartest.Str(car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=30s").Body["lease"])
		sidecartest.ProblemIs(t, car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/batch/participants?id=y&count=5&lease="+other), 409, "count-mismatch")
		if holds := car.Must(t, http.StatusOK, "GET", "/v1/leases/"+other).Body["holds"].([]any); len(holds) != 0 {
			t.Fatalf("a refused participant is held: %v", holds)
		}
		car.Must(t, http.StatusNoContent, "DELETE", "/v1/leases/"+other)
	}
	st := attackerCar.Must(t, http.StatusOK, "GET", "/v1/double-barriers/batch")
	if sidecartest.Num(st.Body["count"]) != 3 || st.Body["ready"] != false || len(st.Body["participants"].([]any)) != 2 {
		t.Fatalf("the barrier changed: %s", st.Raw)
	}
	// Entering again with its own lease and another count: refused, still in.
	sidecartest.ProblemIs(t, victimCar.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/batch/participants?id=p1&count=2&lease="+lease), 409, "count-mismatch")
	// The third participant with the right count makes it ready, for all.
	victimCar.Must(t, http.StatusCreated, "POST", "/v1/double-barriers/batch/participants?id=p3&count=3&ttl=60s")
	victimCar.Must(t, http.StatusCreated, "POST", "/v1/double-barriers/batch/participants?id=p1&count=3&lease="+lease)
	victimCar.Must(t, http.StatusCreated, "POST", "/v1/double-barriers/batch/participants?id=p2&count=3&lease="+implicit)
}

// Participants with another count that race the right ones never make the
// barrier ready early: X (count 4) is in first; then 3 with count 4 and 6 with
// count 1 or 2 enter at once over two sidecars: every wrong one is refused, and
// the right ones pass together.
func TestDoubleBarrierWrongCountsNeverOpenIt(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	cars := []*sidecartest.Sidecar{sidecartest.Start(t, zkc.Servers(), root), sidecartest.Start(t, zkc.Servers(), root)}
	type result struct {
		id     string
		status int
		body   string
	}
	results := make(chan result, 10)
	enter := func(car *sidecartest.Sidecar, id string, count int) {
		r, err := car.Do(context.Background(), "POST", fmt.Sprintf("/v1/double-barriers/race/participants?id=%s&count=%d&wait=20s&ttl=60s", id, count), nil)
		if err != nil {
			results <- result{id, 0, err.Error()}
			return
		}
		results <- result{id, r.Status, string(r.Raw)}
	}
	go enter(cars[0], "x", 4)
	testutil.Eventually(t, 10*time.Second, "x is in", func() bool {
		return len(cars[1].Must(t, 200, "GET", "/v1/double-barriers/race").Body["participants"].([]any)) == 1
	})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() { defer wg.Done(); enter(cars[i%2], fmt.Sprintf("bad%d", i), 1+i%2) }()
	}
	for i := range 3 {
		wg.Add(1)
		go func() { defer wg.Done(); enter(cars[(i+1)%2], fmt.Sprintf("ok%d", i), 4) }()
	}
	wg.Wait()
	for range 10 {
		r := <-results
		want := http.StatusCreated
		if strings.HasPrefix(r.id, "bad") {
			want = http.StatusConflict
			if !strings.Contains(r.body, "count-mismatch") {
				t.Errorf("%s: %d %s, want count-mismatch", r.id, r.status, r.body)
			}
		}
		if r.status != want {
			t.Errorf("%s: %d %s, want %d", r.id, r.status, r.body, want)
		}
	}
}

// The audit: with one lease holding one of everything (a lock, a candidacy, a
// throughput member, a double-barrier participant, a raised barrier, a queue
// claim), no list, state or event that others can read shows the lease id or
// the claim id.
func TestNoListOrEventShowsIDs(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	other := sidecartest.Start(t, zkc.Servers(), root)
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, "POST", "/v1/locks/l?owner=me&lease="+lease)
	car.Must(t, http.StatusCreated, "POST", "/v1/elections/e/candidates?id=c&lease="+lease)
	car.Must(t, http.StatusCreated, "POST", "/v1/throughput/g/members?id=m&lease="+lease)
	car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/d/participants?id=p&count=2&lease="+lease)
	car.Must(t, http.StatusNoContent, "PUT", "/v1/barriers/b?lease="+lease)
	if r := car.DoReq(t, "POST", "/v1/queues/q/items", strings.NewReader("x")); r.Status != 201 {
		t.Fatal(r.Status)
	}
	claim := car.Must(t, http.StatusOK, "POST", "/v1/queues/q/claims?lease="+lease).Header.Get("Claim-Id")
	secrets := []string{lease, claim}
	if lease == "" || claim == "" {
		t.Fatal("no lease or claim id")
	}
	check := func(what string, b []byte) {
		for _, id := range secrets {
			if strings.Contains(string(b), id) {
				t.Fatalf("%s shows %s: %s", what, id, b)
			}
		}
	}
	for _, s := range []*sidecartest.Sidecar{car, other} {
		for _, p := range []string{"/v1/locks", "/v1/locks/l", "/v1/elections", "/v1/elections/e", "/v1/throughput",
			"/v1/throughput/g", "/v1/throughput/g/members/m", "/v1/double-barriers", "/v1/double-barriers/d",
			"/v1/barriers", "/v1/barriers/b", "/v1/queues", "/v1/queues/q", "/v1/queues/q/items", "/v1/session", "/metrics"} {
			r := s.Must(t, http.StatusOK, "GET", p)
			check("GET "+p, r.Raw)
			for k, v := range r.Header {
				check("header "+k, []byte(strings.Join(v, " ")))
			}
		}
		for _, p := range []string{"/v1/events", "/v1/elections/e/events", "/v1/throughput/g/events", "/v1/session/events"} {
			st := s.OpenStream(t, p)
			ev := st.Next(t, 10*time.Second)
			deadline := time.After(300 * time.Millisecond) // the opening burst of current states
		drain:
			for {
				b, _ := jsonMarshal(ev.Data)
				check(p+" event "+ev.Name, b)
				select {
				case ev = <-st.Events:
				case <-deadline:
					break drain
				}
			}
			st.Cancel()
		}
	}
}

// A rejected request leaves no lease: every acquiring route, refused for each
// reason it can be, with an implicit lease.
func TestRejectedRequestsLeaveNoLease(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	// State that makes the refusals happen.
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, "POST", "/v1/locks/held?lease="+lease)
	car.Must(t, http.StatusCreated, "POST", "/v1/elections/e/candidates?id=c1&lease="+lease)
	car.Must(t, http.StatusCreated, "POST", "/v1/throughput/g/members?id=m1&lease="+lease)
	car.Must(t, http.StatusConflict, "POST", "/v1/double-barriers/d/participants?id=p1&count=2&lease="+lease)

	big := `{"value":"` + strings.Repeat("v", 5000) + `"}`
	cases := []struct {
		method, path, body string
		status             int
		problem            string
	}{
		{"POST", "/v1/elections/e/candidates?id=c2&ttl=30s", big, 400, "invalid-body"},
		{"POST", "/v1/elections/e/candidates?id=c1&ttl=30s", "", 409, "candidate-exists"},
		{"POST", "/v1/locks/held?ttl=30s", "", 409, "lock-held"},
		{"POST", "/v1/locks/held?ttl=30s&wait=100ms", "", 409, "lock-held"},
		{"POST", "/v1/throughput/g/members?id=m1&ttl=30s", "", 409, "member-exists"},
		{"POST", "/v1/double-barriers/d/participants?id=p1&count=2&ttl=30s", "", 409, "participant-exists"},
		{"POST", "/v1/double-barriers/d/participants?id=p2&count=3&ttl=30s", "", 409, "count-mismatch"},
		{"POST", "/v1/queues/empty/claims?ttl=30s", "", 204, ""},
		{"POST", "/v1/queues/empty/claims?ttl=30s&wait=100ms", "", 204, ""},
	}
	for _, c := range cases {
		var body io.Reader
		var hdr []string
		if c.body != "" {
			body, hdr = strings.NewReader(c.body), []string{"Content-Type", "application/json"}
		}
		r := car.DoReq(t, c.method, c.path, body, hdr...)
		if c.problem != "" {
			sidecartest.ProblemIs(t, r, c.status, c.problem)
		} else if r.Status != c.status {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.Status, r.Raw)
		}
		testutil.Eventually(t, 5*time.Second, c.method+" "+c.path+" leaves only the one lease", func() bool {
			return sidecartest.Num(car.Must(t, http.StatusOK, "GET", "/v1/session").Body["leases"]) == 1
		})
	}
}

// --- 2. Scoped tokens --------------------------------------------------------

const (
	tokApp    = "app-token-0123456789"
	tokOther  = "other-token-0123456789"
	tokReader = "reader-token-0123456789"
	tokAll    = "the-all-token"
)

func writeTokens(t *testing.T, path string, body string) {
	t.Helper()
	sidecartest.WriteFile(t, filepath.Dir(path), filepath.Base(path), []byte(body))
}

const tokensJSON = `{"tokens":[
 {"name":"app","token":"` + tokApp + `","allow":["locks/app-*","locks/shared-*","queues/shared-q","elections/*"]},
 {"name":"other","token":"` + tokOther + `","allow":["locks/other-*","locks/shared-*","queues/*"]},
 {"name":"reader","token":"` + tokReader + `","allow":["*"],"readOnly":true}
]}`

// A scoped token reaches only its kinds and names, a read-only token only
// reads, a lease of another token does not exist, lists and /v1/events show
// only what the token may read, and SIGHUP (Reload) swaps the tokens.
func TestScopedTokens(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.json")
	writeTokens(t, file, tokensJSON)
	tokenFile := sidecartest.WriteFile(t, dir, "token", []byte(tokAll+"\n"))
	// The tokens come from the environment and files, not from argv.
	m, err := runMain(t, map[string]string{"COORD_TOKENS_FILE": file, "COORD_TOKEN_FILE": tokenFile},
		append([]string{"--listen", "127.0.0.1:0"}, zkArgs(zkc.Servers(), root)...)...)
	if err != nil {
		t.Fatal(err)
	}
	base := &sidecartest.Sidecar{M: m, Base: "http://" + m.Addr()}
	base.WaitReady(t)
	app, other, reader, all := base.As(sidecartest.Bearer(tokApp)...), base.As(sidecartest.Bearer(tokOther)...), base.As(sidecartest.Bearer(tokReader)...), base.As(sidecartest.Bearer(tokAll)...)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)

	sidecartest.ProblemIs(t, base.Must(t, 401, "GET", "/v1/locks"), 401, "unauthorized")
	sidecartest.ProblemIs(t, base.As(sidecartest.Bearer("nope")...).Must(t, 401, "GET", "/v1/locks"), 401, "unauthorized")

	la := sidecartest.Str(app.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	app.Must(t, http.StatusCreated, "POST", "/v1/locks/app-1?lease="+la)
	app.Must(t, http.StatusCreated, "POST", "/v1/locks/shared-1?lease="+la)
	other.Must(t, http.StatusCreated, "POST", "/v1/locks/other-1")
	app.Must(t, http.StatusCreated, "POST", "/v1/elections/e1/candidates?id=c1&lease="+la)

	before := zktest.Dump(t, conn, root)
	forbidden := []struct {
		car          *sidecartest.Sidecar
		method, path string
	}{
		{app, "POST", "/v1/locks/other-2"},
		{app, "GET", "/v1/locks/other-1"},
		{app, "GET", "/v1/locks/other-1/events"},
		{app, "DELETE", "/v1/locks/other-1?lease=" + la},
		{app, "POST", "/v1/queues/other-q/items"},
		{app, "PUT", "/v1/barriers/b"},
		{app, "POST", "/v1/double-barriers/d/participants?id=p&count=2"},
		{app, "PUT", "/v1/throughput/g"},
		{other, "POST", "/v1/elections/e1/candidates?id=c2"},
		{other, "GET", "/v1/elections/e1/events"},
		{reader, "POST", "/v1/leases"},
		{reader, "POST", "/v1/locks/app-2"},
		{reader, "DELETE", "/v1/locks/app-1?lease=" + la},
		{reader, "POST", "/v1/queues/shared-q/take"},
	}
	for _, c := range forbidden {
		sidecartest.ProblemIs(t, c.car.DoReq(t, c.method, c.path, nil), 403, "forbidden")
	}
	// A lease of another token does not exist.
	notFound := []struct {
		car          *sidecartest.Sidecar
		method, path string
	}{
		{other, "GET", "/v1/leases/" + la},
		{other, "GET", "/v1/leases/" + la + "/events"},
		{other, "POST", "/v1/leases/" + la + "/keepalive"},
		{other, "DELETE", "/v1/leases/" + la},
		{other, "DELETE", "/v1/locks/shared-1?lease=" + la},
		{other, "POST", "/v1/locks/other-3?lease=" + la},
		{all, "DELETE", "/v1/leases/" + la},
		{reader, "GET", "/v1/leases/" + la},
	}
	for _, c := range notFound {
		sidecartest.ProblemIs(t, c.car.DoReq(t, c.method, c.path, nil), 404, "lease-not-found")
	}
	if after := zktest.Dump(t, conn, root); !slices.Equal(before, after) {
		t.Fatalf("refused requests changed ZooKeeper:\nbefore %v\nafter  %v", before, after)
	}
	app.Must(t, http.StatusOK, "GET", "/v1/leases/"+la)

	// A claim belongs to its lease's token too.
	if r := other.DoReq(t, "POST", "/v1/queues/shared-q/items", strings.NewReader("job")); r.Status != 201 {
		t.Fatalf("enqueue: %s", r.Raw)
	}
	claimed := app.Must(t, http.StatusOK, "POST", "/v1/queues/shared-q/claims?ttl=60s")
	claim := claimed.Header.Get("Claim-Id")
	sidecartest.ProblemIs(t, other.Must(t, 404, "DELETE", "/v1/queues/shared-q/claims/"+claim), 404, "claim-not-found")
	sidecartest.ProblemIs(t, other.Must(t, 404, "POST", "/v1/queues/shared-q/claims/"+claim+"/release"), 404, "claim-not-found")
	app.Must(t, http.StatusNoContent, "DELETE", "/v1/queues/shared-q/claims/"+claim)

	checkTokenReads(t, app, other, reader)

	checkTokenReload(t, m, file, base, app, other, all)
}

// checkTokenReads: lists show what each token may read, and the app's
// /v1/events stream has its locks and never the other's.
func checkTokenReads(t *testing.T, app, other, reader *sidecartest.Sidecar) {
	t.Helper()
	names := func(car *sidecartest.Sidecar) []string {
		var out []string
		for _, l := range car.Must(t, http.StatusOK, "GET", "/v1/locks").Body["locks"].([]any) {
			out = append(out, sidecartest.Str(l.(map[string]any)["name"]))
		}
		slices.Sort(out)
		return out
	}
	if got := names(app); !slices.Equal(got, []string{"app-1", "shared-1"}) {
		t.Fatalf("app lists %v", got)
	}
	if got := names(other); !slices.Equal(got, []string{"other-1", "shared-1"}) {
		t.Fatalf("other lists %v", got)
	}
	if got := names(reader); !slices.Equal(got, []string{"app-1", "other-1", "shared-1"}) {
		t.Fatalf("reader lists %v", got)
	}
	if n := len(other.Must(t, http.StatusOK, "GET", "/v1/elections").Body["elections"].([]any)); n != 0 {
		t.Fatalf("other sees %d elections", n)
	}
	reader.Must(t, http.StatusOK, "GET", "/v1/locks/app-1")
	reader.Must(t, http.StatusOK, "GET", "/v1/elections/e1")

	// /v1/events: the app's stream has its locks and never the other's.
	st := app.OpenStream(t, "/v1/events")
	seen := map[string]bool{}
	deadline := time.After(10 * time.Second)
	for !(seen["lock/app-1"] && seen["lock/shared-1"] && seen["leader/e1"]) {
		select {
		case ev := <-st.Events:
			seen[ev.Name+"/"+sidecartest.Str(ev.Data["name"])] = true
		case <-deadline:
			t.Fatalf("app's stream showed %v", seen)
		}
	}
	other.Must(t, http.StatusCreated, "POST", "/v1/locks/other-2")
	app.Must(t, http.StatusCreated, "POST", "/v1/locks/app-2")
	for !seen["lock/app-2"] {
		select {
		case ev := <-st.Events:
			seen[ev.Name+"/"+sidecartest.Str(ev.Data["name"])] = true
		case <-deadline:
			t.Fatalf("app's stream showed %v", seen)
		}
	}
	if seen["lock/other-1"] || seen["lock/other-2"] {
		t.Fatalf("app's stream showed the other's locks: %v", seen)
	}
	st.Cancel()

}

// checkTokenReload: a reload (SIGHUP) swaps the tokens; a broken file changes
// nothing; an emptied one closes the sidecar to all but --token-file's token.
func checkTokenReload(t *testing.T, m *sidecar.Main, file string, base, app, other, all *sidecartest.Sidecar) {
	t.Helper()
	// Reload: "app" is removed and "other" gets a new secret; a broken file
	// changes nothing.
	writeTokens(t, file, `{"tokens":[{"name":"other","token":"other-token-NEW-0123456789","allow":["*"]}]}`)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	sidecartest.ProblemIs(t, app.Must(t, 401, "GET", "/v1/locks"), 401, "unauthorized")
	sidecartest.ProblemIs(t, other.Must(t, 401, "GET", "/v1/locks"), 401, "unauthorized")
	other2 := base.As(sidecartest.Bearer("other-token-NEW-0123456789")...)
	other2.Must(t, http.StatusOK, "GET", "/v1/locks/app-1")
	all.Must(t, http.StatusOK, "GET", "/v1/locks")
	writeTokens(t, file, `{"tokens":[{"name":"x","token":"short"}]}`)
	if err := m.Reload(); err == nil {
		t.Fatal("a token shorter than 16 characters was accepted")
	}
	writeTokens(t, file, `{"tokens":[{"name":"x","token":"0123456789abcdefgh","allow":["nosuchkind/*"]}]}`)
	if err := m.Reload(); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
	other2.Must(t, http.StatusOK, "GET", "/v1/locks")
	// An emptied tokens file closes the sidecar to all but --token-file's token;
	// it never opens it.
	writeTokens(t, file, `{"tokens":[]}`)
	if err := m.Reload(); err != nil {
		t.Fatal(err)
	}
	sidecartest.ProblemIs(t, other2.Must(t, 401, "GET", "/v1/locks"), 401, "unauthorized")
	sidecartest.ProblemIs(t, base.Must(t, 401, "GET", "/v1/locks"), 401, "unauthorized")
	all.Must(t, http.StatusOK, "GET", "/v1/locks")
}

// Bad tokens configuration stops the start.
func TestTokenConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		body string
		args []string
	}{
		{`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["locks"]}]}`, nil},
		{`{"tokens":[{"name":"a","token":"0123456789abcdefgh"},{"name":"a","token":"0123456789abcdefgX"}]}`, nil},
		{`{"tokens":[{"name":"a","token":"0123456789abcdefgh"},{"name":"b","token":"0123456789abcdefgh"}]}`, nil},
		{`{"tokens":[{"name":"a b","token":"0123456789abcdefgh"}]}`, nil},
		{`{"tokens":[{"name":"a","token":"0123456789abcdefgh","allow":["locks/a*b"]}]}`, nil},
		{`{"tokens":[{"name":"a","token":"0123456789abcdefgh","extra":1}]}`, nil},
		{`{"tokens":[{"name":"a","token":"0123456789abcdefgh","maxStreams":-1}]}`, nil},
		{`{"tokens":[]}`, []string{"--token", "x", "--token-file", filepath.Join(dir, "t")}},
	} {
		file := sidecartest.WriteFile(t, dir, "tokens.json", []byte(c.body))
		m := sidecar.NewMain()
		if err := m.ParseFlags(append([]string{"--tokens-file", file}, c.args...), func(string) string { return "" }); err == nil {
			t.Errorf("accepted %s %v", c.body, c.args)
		}
	}
}

// --- 3. Browser protections --------------------------------------------------

// With the defaults, requests from a foreign Origin or Host change nothing: a
// cross-site text/plain take does not consume the item, a form-encoded lock is
// not taken, a rebound Host is refused; the sidecar's own origin works, and CORS
// answers go to --allowed-origins only.
func TestBrowserProtections(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	cors := sidecartest.Start(t, zkc.Servers(), root, "--allowed-origins", "https://app.example.com")
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	port := car.Base[strings.LastIndex(car.Base, ":")+1:]
	if r := car.DoReq(t, "POST", "/v1/queues/q/items", strings.NewReader("job-1"), "Content-Type", "text/plain"); r.Status != 201 {
		t.Fatalf("enqueue: %s", r.Raw)
	}
	before := zktest.Dump(t, conn, root)

	evil := []struct {
		what, method, path, body string
		hdr                      []string
		status                   int
		problem                  string
	}{
		{"cross-site text/plain take", "POST", "/v1/queues/q/take", "x", []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}, 403, "origin-not-allowed"},
		{"cross-site form lock", "POST", "/v1/locks/x?ttl=1h", "a=b", []string{"Origin", "https://evil.example", "Content-Type", "application/x-www-form-urlencoded"}, 403, "origin-not-allowed"},
		{"null origin", "POST", "/v1/locks/x", "", []string{"Origin", "null"}, 403, "origin-not-allowed"},
		{"other port of the same host", "POST", "/v1/locks/x", "", []string{"Origin", "http://127.0.0.1:1"}, 403, "origin-not-allowed"},
		{"https on the own host", "POST", "/v1/locks/x", "", []string{"Origin", "https://127.0.0.1:" + port}, 403, "origin-not-allowed"},
		{"cross-site fetch without Origin", "POST", "/v1/queues/q/take", "", []string{"Sec-Fetch-Site", "cross-site"}, 403, "origin-not-allowed"},
		{"cross-site read of a list", "GET", "/v1/locks", "", []string{"Origin", "http://evil.example"}, 403, "origin-not-allowed"},
		{"cross-site event stream", "GET", "/v1/events", "", []string{"Origin", "http://evil.example"}, 403, "origin-not-allowed"},
		{"preflight from a foreign origin", "OPTIONS", "/v1/locks/x", "", []string{"Origin", "http://evil.example", "Access-Control-Request-Method", "POST"}, 403, "origin-not-allowed"},
		{"DNS rebinding take", "POST", "/v1/queues/q/take", "", []string{"Host", "rebind.evil.example:" + port}, 403, "host-not-allowed"},
		{"DNS rebinding read", "GET", "/v1/locks", "", []string{"Host", "rebind.evil.example"}, 403, "host-not-allowed"},
		{"DNS rebinding status page", "GET", "/ui/", "", []string{"Host", "rebind.evil.example"}, 403, "host-not-allowed"},
		{"DNS rebinding metrics", "GET", "/metrics", "", []string{"Host", "rebind.evil.example"}, 403, "host-not-allowed"},
	}
	for _, c := range evil {
		for _, s := range []*sidecartest.Sidecar{car, cors} {
			r := s.DoReq(t, c.method, c.path, strings.NewReader(c.body), c.hdr...)
			if r.Status != c.status || !strings.HasSuffix(sidecartest.Str(r.Body["type"]), c.problem) {
				t.Fatalf("%s: %d %s", c.what, r.Status, r.Raw)
			}
			if r.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("%s: a CORS answer to a foreign origin: %v", c.what, r.Header)
			}
		}
	}
	if after := zktest.Dump(t, conn, root); !slices.Equal(before, after) {
		t.Fatalf("foreign requests changed ZooKeeper:\nbefore %v\nafter  %v", before, after)
	}
	if n := sidecartest.Num(car.Must(t, http.StatusOK, "GET", "/v1/queues/q").Body["length"]); n != 1 {
		t.Fatalf("the queue has %d items, want the 1 nobody took", n)
	}
	car.Must(t, http.StatusOK, "GET", "/v1/locks/x")

	checkBrowserAllowed(t, car, cors, port)
}

// checkBrowserAllowed: probes pass whatever the Host, the usual loopback names
// pass, the sidecar's own origin works without CORS headers, and an allowed
// origin gets its preflight and CORS headers.
func checkBrowserAllowed(t *testing.T, car, cors *sidecartest.Sidecar, port string) {
	t.Helper()
	// Probes pass whatever the Host; the usual loopback names pass.
	for _, p := range []string{"/healthz", "/readyz"} {
		if r := car.DoReq(t, "GET", p, nil, "Host", "10.1.2.3:8080"); r.Status != 200 {
			t.Fatalf("%s with a pod's Host: %d", p, r.Status)
		}
	}
	for _, h := range []string{"localhost:" + port, "LOCALHOST", "127.0.0.1", "[::1]:" + port} {
		if r := car.DoReq(t, "GET", "/v1/session", nil, "Host", h); r.Status != 200 {
			t.Fatalf("Host %s: %d %s", h, r.Status, r.Raw)
		}
	}
	// The sidecar's own origin (the status page's) works, without CORS headers.
	own := car.DoReq(t, "POST", "/v1/queues/q/take", nil, "Origin", car.Base, "Sec-Fetch-Site", "same-origin")
	if own.Status != 200 || own.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("same-origin take: %d %v", own.Status, own.Header)
	}
	// An allowed origin gets its preflight and CORS headers.
	pre := cors.DoReq(t, "OPTIONS", "/v1/locks/y", nil, "Origin", "https://app.example.com",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization")
	if pre.Status != 204 || pre.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", pre.Status, pre.Header)
	}
	got := cors.DoReq(t, "POST", "/v1/locks/y", nil, "Origin", "https://app.example.com")
	if got.Status != 201 || got.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(got.Header.Get("Access-Control-Expose-Headers"), "Claim-Id") {
		t.Fatalf("allowed origin: %d %v", got.Status, got.Header)
	}
}

// --- 6. HTTPS and a unix socket ----------------------------------------------

// HTTPS with client certificates: a client with a certificate the client CA
// signed is served; one without, or one that trusts another CA, is not; the
// files are re-read when they change; the lock subcommand reaches it over
// https:// with --cacert, --cert and --key.
func TestHTTPSWithClientCertificates(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	dir := t.TempDir()
	ca, clientCA, otherCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "other CA")
	certPEM, keyPEM := ca.issue(t, "sidecar", true)
	clientCert, clientKey := clientCA.issue(t, "app", false)
	strangerCert, strangerKey := otherCA.issue(t, "stranger", false)
	certFile := sidecartest.WriteFile(t, dir, "tls.crt", certPEM)
	keyFile := sidecartest.WriteFile(t, dir, "tls.key", keyPEM)
	caFile := sidecartest.WriteFile(t, dir, "client-ca.pem", clientCA.pem)

	m, err := runMain(t, nil, append([]string{"--listen", "127.0.0.1:0", "--tls-cert", certFile, "--tls-key", keyFile,
		"--tls-client-ca", caFile}, zkArgs(zkc.Servers(), root)...)...)
	if err != nil {
		t.Fatal(err)
	}
	base := "https://" + m.Addr()
	car := &sidecartest.Sidecar{M: m, Base: base, Client: tlsClient(t, ca.pem, clientCert, clientKey)}
	car.WaitReady(t)
	g := car.Must(t, http.StatusCreated, "POST", "/v1/locks/tls")
	car.Must(t, http.StatusNoContent, "DELETE", "/v1/locks/tls?lease="+sidecartest.Str(g.Body["lease"]))

	refused := map[string]*http.Client{
		"no client certificate":       tlsClient(t, ca.pem, nil, nil),
		"a certificate of another CA": tlsClient(t, ca.pem, strangerCert, strangerKey),
		"a client trusting other CA":  tlsClient(t, otherCA.pem, clientCert, clientKey),
	}
	for what, c := range refused {
		if resp, err := c.Get(base + "/v1/session"); err == nil {
			resp.Body.Close()
			t.Fatalf("%s: served %d", what, resp.StatusCode)
		}
	}
	if resp, err := http.Get("http://" + m.Addr() + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode < 400 {
			t.Fatalf("plain HTTP on the TLS port: %d", resp.StatusCode)
		}
	}

	// Certificate rotation: a new server certificate (from another CA) and a
	// new client CA are picked up without a restart.
	ca2 := newTestCA(t, "server CA 2")
	cert2, key2 := ca2.issue(t, "sidecar", true)
	sidecartest.WriteFile(t, dir, "tls.key", key2)
	sidecartest.WriteFile(t, dir, "tls.crt", cert2)
	sidecartest.WriteFile(t, dir, "client-ca.pem", otherCA.pem)
	rotated := &sidecartest.Sidecar{M: m, Base: base, Client: tlsClient(t, ca2.pem, strangerCert, strangerKey)}
	testutil.Eventually(t, 10*time.Second, "the rotated certificate is served", func() bool {
		r, err := rotated.Do(context.Background(), "GET", "/v1/session", nil)
		return err == nil && r.Status == 200
	})
	if resp, err := tlsClient(t, ca.pem, clientCert, clientKey).Get(base + "/v1/session"); err == nil {
		resp.Body.Close()
		t.Fatal("the old certificate and client CA still serve")
	}

	// The lock subcommand over https://.
	out := filepath.Join(dir, "out")
	stderr := &strings.Builder{}
	code := ctl.RunLock(sidecartest.QuietSignals(t), []string{"rotated", "--addr", base, "--wait", "5s", "--", "sh", "-c", "echo $COORD_FENCING_TOKEN > " + out},
		func(k string) string {
			return map[string]string{"COORD_CACERT": sidecartest.WriteFile(t, dir, "ca2.pem", ca2.pem),
				"COORD_CERT": sidecartest.WriteFile(t, dir, "c.crt", strangerCert), "COORD_KEY": sidecartest.WriteFile(t, dir, "c.key", strangerKey)}[k]
		}, io.Discard, stderr)
	if b, _ := os.ReadFile(out); code != 0 || len(strings.TrimSpace(string(b))) == 0 {
		t.Fatalf("lock over https: exit %d, fencing token %q, stderr %s", code, b, stderr)
	}
	// Without the CA the subcommand does not trust the sidecar.
	if code := ctl.RunLock(sidecartest.QuietSignals(t), []string{"rotated", "--addr", base, "--", "true"},
		func(string) string { return "" }, io.Discard, io.Discard); code != ctl.ExitUnavailable {
		t.Fatalf("lock over https without --cacert: exit %d", code)
	}
}

// A unix socket: a stale socket file is replaced, the socket is mode 0660, the
// subcommands reach it with --addr unix:PATH, and the file goes at exit.
func TestUnixSocketListener(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	dir, err := os.MkdirTemp("", "coord-sock-") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "coord.sock")

	// A regular file in the way is an error; a stale socket is removed.
	sidecartest.WriteFile(t, dir, "coord.sock", []byte("not a socket"))
	if _, err := runMain(t, nil, append([]string{"--listen", "unix:" + sock}, zkArgs(zkc.Servers(), root)...)...); err == nil {
		t.Fatal("started over a regular file")
	}
	os.Remove(sock)
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	if _, err := os.Stat(sock); err != nil {
		t.Fatalf("no stale socket to start over: %v", err)
	}

	m, err := runMain(t, nil, append([]string{"--listen", "unix:" + sock}, zkArgs(zkc.Servers(), root)...)...)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	// A second sidecar on a live socket is refused.
	if _, err := runMain(t, nil, append([]string{"--listen", "unix:" + sock}, zkArgs(zkc.Servers(), root)...)...); err == nil {
		t.Fatal("a second sidecar took over a live socket")
	}
	baseURL, hc, err := ctl.Dial("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	car := &sidecartest.Sidecar{M: m, Base: baseURL, Client: hc}
	car.WaitReady(t)
	car.Must(t, http.StatusCreated, "POST", "/v1/locks/over-unix")
	// A foreign Host is refused on a unix socket too.
	sidecartest.ProblemIs(t, car.DoReq(t, "GET", "/v1/locks", nil, "Host", "rebind.evil.example"), 403, "host-not-allowed")

	out := filepath.Join(dir, "out")
	code := ctl.RunLock(sidecartest.QuietSignals(t), []string{"unix-lock", "--addr", "unix:" + sock, "--", "sh", "-c", "echo $COORD_FENCING_TOKEN > " + out},
		func(string) string { return "" }, io.Discard, io.Discard)
	if b, _ := os.ReadFile(out); code != 0 || len(strings.TrimSpace(string(b))) == 0 {
		t.Fatalf("lock over unix: exit %d, %q", code, b)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket file is still there after exit: %v", err)
	}
}

// The real binary: tokens from COORD_TOKENS_FILE, reloaded on SIGHUP, served on
// a unix socket that is gone after SIGTERM.
func TestBinaryReloadsTokensOnSIGHUP(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	dir, err := os.MkdirTemp("", "coord-hup-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	file := sidecartest.WriteFile(t, dir, "tokens.json", []byte(tokensJSON))
	cmd := exec.Command(sidecartest.BuildBinary(t), append([]string{"--listen", "unix:" + sock}, zkArgs(zkc.Servers(), zktest.Root(t))...)...)
	cmd.Env = append(os.Environ(), "COORD_TOKENS_FILE="+file)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	baseURL, hc, err := ctl.Dial("unix:" + sock)
	if err != nil {
		t.Fatal(err)
	}
	car := &sidecartest.Sidecar{Base: baseURL, Client: hc}
	testutil.Eventually(t, 30*time.Second, "the socket serves", func() bool {
		r, err := car.Do(context.Background(), "GET", "/readyz", nil)
		return err == nil && r.Status == 200
	})
	car.As(sidecartest.Bearer(tokApp)...).Must(t, http.StatusOK, "GET", "/v1/locks")
	sidecartest.WriteFile(t, dir, "tokens.json", []byte(`{"tokens":[{"name":"new","token":"brand-new-token-0123","allow":["*"]}]}`))
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "the new token is in force", func() bool {
		r, err := car.As(sidecartest.Bearer("brand-new-token-0123")...).Do(context.Background(), "GET", "/v1/locks", nil)
		return err == nil && r.Status == 200
	})
	sidecartest.ProblemIs(t, car.As(sidecartest.Bearer(tokApp)...).Must(t, 401, "GET", "/v1/locks"), 401, "unauthorized")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("the socket file is still there: %v", err)
	}
}

// --- 7. Limits -----------------------------------------------------------------

// --max-leases: past it, 429 too-many-leases, implicit leases included.
func TestMaxLeases(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--max-leases", "2")
	l1 := sidecartest.Str(car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, "POST", "/v1/locks/a") // an implicit lease
	r := car.Must(t, http.StatusTooManyRequests, "POST", "/v1/leases?ttl=60s")
	sidecartest.ProblemIs(t, r, 429, "too-many-leases")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("429 without Retry-After: %v", r.Header)
	}
	sidecartest.ProblemIs(t, car.Must(t, http.StatusTooManyRequests, "POST", "/v1/locks/b"), 429, "too-many-leases")
	car.Must(t, http.StatusCreated, "POST", "/v1/locks/b?lease="+l1) // an existing lease still acquires
	car.Must(t, http.StatusNoContent, "DELETE", "/v1/leases/"+l1)
	car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s")
}

// GET /v1/session's leases are the caller's token's: with two tenants, each
// sees its own count (an implicit lease held by a lock included, a revoked one
// gone); without tokens, and with --token alone, every lease counts.
func TestSessionCountsTheTokensLeases(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.json")
	writeTokens(t, file, tokensJSON)
	scoped := sidecartest.Start(t, zkc.Servers(), root, "--tokens-file", file)
	a, b := scoped.As(sidecartest.Bearer(tokApp)...), scoped.As(sidecartest.Bearer(tokOther)...)
	leasesOf := func(car *sidecartest.Sidecar) int {
		return int(sidecartest.Num(car.Must(t, http.StatusOK, "GET", "/v1/session").Body["leases"]))
	}

	a.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s")
	b.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s")
	lb := sidecartest.Str(b.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
	b.Must(t, http.StatusCreated, "POST", "/v1/locks/other-1") // an implicit lease
	if na, nb := leasesOf(a), leasesOf(b); na != 1 || nb != 3 {
		t.Fatalf("leases: app sees %d, want 1; other sees %d, want 3", na, nb)
	}
	if n := leasesOf(scoped.As(sidecartest.Bearer(tokReader)...)); n != 0 {
		t.Fatalf("leases: reader sees %d, want 0", n)
	}
	b.Must(t, http.StatusNoContent, "DELETE", "/v1/leases/"+lb)
	if na, nb := leasesOf(a), leasesOf(b); na != 1 || nb != 2 {
		t.Fatalf("after a revoke: app sees %d, want 1; other sees %d, want 2", na, nb)
	}

	for _, args := range [][]string{nil, {"--token", "s3cret"}} {
		car := sidecartest.Start(t, zkc.Servers(), root, args...)
		if len(args) > 0 {
			car = car.As(sidecartest.Bearer("s3cret")...)
		}
		car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s")
		car.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s")
		if n := leasesOf(car); n != 2 {
			t.Fatalf("%v: leases %d, want 2", args, n)
		}
	}
}

// rawRequest writes a request by hand and returns the status line and body.
func rawRequest(t *testing.T, addr, head string, body string, closeWrite bool) (status string, rest string, err error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c, head+body); err != nil {
		t.Fatal(err)
	}
	if closeWrite {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	br := bufio.NewReader(c)
	status, err = br.ReadString('\n')
	if err != nil {
		return "", "", err
	}
	b, _ := io.ReadAll(br)
	return strings.TrimSpace(status), string(b), nil
}

// A body shorter than its Content-Length is the client's fault: 400, nothing
// stored; a body that trickles is cut at --body-timeout (408), while a long-poll
// without a body is not; past --max-conns, connections wait to be accepted.
func TestBodyLimits(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root, "--body-timeout", "1s")
	addr := car.M.Addr()
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	before := zktest.Dump(t, conn, root)

	for _, req := range []string{
		"POST /v1/queues/q/items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 100\r\n\r\n",
		"PUT /v1/throughput/g HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
		"POST /v1/elections/e/candidates?id=c HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
	} {
		status, body, err := rawRequest(t, addr, req, `{"limit":`, true)
		if err != nil || !strings.Contains(status, " 400 ") || !strings.Contains(body, "invalid-body") {
			t.Fatalf("short body: %q %q %v", status, body, err)
		}
	}
	// A trickled body: cut at the deadline.
	start := time.Now()
	status, body, err := rawRequest(t, addr, "POST /v1/queues/q/items HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n", "ab", false)
	if err != nil || !strings.Contains(status, " 408 ") || !strings.Contains(body, "body-timeout") {
		t.Fatalf("trickled body: %q %q %v", status, body, err)
	}
	if d := time.Since(start); d > testutil.Patience(5*time.Second) {
		t.Fatalf("the trickled body was cut after %s", d)
	}
	if after := zktest.Dump(t, conn, root); !slices.Equal(before, after) {
		t.Fatalf("cut bodies changed ZooKeeper:\nbefore %v\nafter  %v", before, after)
	}
	// A long-poll with a body lasts past the body timeout.
	g := car.Must(t, http.StatusCreated, "POST", "/v1/elections/e/candidates?id=first")
	start = time.Now()
	r := car.DoReq(t, "POST", "/v1/elections/e/candidates?id=second&wait=2500ms", strings.NewReader(`{"value":"v"}`), "Content-Type", "application/json")
	if r.Status != http.StatusCreated || r.Body["leader"] != false || time.Since(start) < 2*time.Second {
		t.Fatalf("long-poll with a body: %d after %s: %s", r.Status, time.Since(start), r.Raw)
	}
	_ = g
}

// Past --max-conns, a new connection waits until one closes while none is
// idle (here both places are event streams); with idle kept-alive ones, the
// longest-idle is closed at once to make room for it (issue 40).
func TestMaxConnections(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--max-conns", "2")
	http.DefaultTransport.(*http.Transport).CloseIdleConnections() // waitReady's
	hold := func(path string) (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", car.M.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// A served request makes sure the connection was accepted.
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path)
		br := bufio.NewReader(c)
		if line, err := br.ReadString('\n'); err != nil || !strings.Contains(line, "200") {
			t.Fatalf("held connection: %q %v", line, err)
		}
		return c, br
	}
	streams := []net.Conn{}
	for range 2 {
		c, _ := hold("/v1/session/events")
		streams = append(streams, c)
	}
	client := &http.Client{Timeout: 500 * time.Millisecond, Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := client.Get(car.Base + "/healthz"); err == nil {
		resp.Body.Close()
		t.Fatal("a third connection was served past --max-conns 2, both held by event streams")
	}
	streams[0].Close()
	streams[1].Close()
	client.Timeout = testutil.Patience(10 * time.Second)
	resp, err := client.Get(car.Base + "/healthz")
	if err != nil {
		t.Fatalf("after the connections closed: %v", err)
	}
	resp.Body.Close()

	// Two idle kept-alive connections: a third is served, the longest-idle
	// closed to make room.
	first, firstR := hold("/healthz")
	hold("/healthz")
	resp, err = client.Get(car.Base + "/healthz")
	if err != nil {
		t.Fatalf("a new connection with two idle ones at --max-conns 2: %v", err)
	}
	resp.Body.Close()
	_ = first.SetReadDeadline(time.Now().Add(testutil.Patience(10 * time.Second)))
	if _, err := io.Copy(io.Discard, firstR); err != nil {
		t.Fatalf("the longest-idle connection was not closed to make room: %v", err)
	}
}

// A client that goes away while it waits is counted as 499, not as a 5xx.
func TestClientGoneIsCounted499(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	car.Must(t, http.StatusCreated, "POST", "/v1/locks/busy")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = car.Do(ctx, "POST", "/v1/locks/busy?wait=30s", nil)
	}()
	testutil.Eventually(t, 10*time.Second, "a waiter", func() bool {
		return sidecartest.Num(car.Must(t, http.StatusOK, "GET", "/v1/locks/busy").Body["waiters"]) == 1
	})
	cancel()
	<-done
	testutil.Eventually(t, 10*time.Second, "the waiter counted as 499", func() bool {
		r, err := car.Do(context.Background(), "GET", "/metrics", nil)
		if err != nil {
			return false
		}
		return strings.Contains(string(r.Raw), `coord_http_requests_total{code="499",route="POST /v1/locks/{name}"} 1`)
	})
	r := car.Must(t, http.StatusOK, "GET", "/metrics")
	if strings.Contains(string(r.Raw), `code="503",route="POST /v1/locks/{name}"`) {
		t.Fatal("the gone client was counted as 503 too")
	}
}
