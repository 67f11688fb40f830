package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The status page at /ui/ in a real headless Chromium, driven over the DevTools
// protocol: it loads without console errors, shows a new lock holder and a new
// leader within a second, greys itself out with a "Disconnected" banner when the
// ZooKeeper session is suspended and when the sidecar stops, and rebuilds itself
// from the stream when the sidecar is back. UI_SCREENSHOT=1 writes docs/ui.png.
func TestStatusPage(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	page := browsertest.Start(t)
	zkc := zktest.StartStandalone(t) // its own server: the test stops it
	root := zktest.Root(t)
	addr := sidecartest.FreeAddr(t)
	car, stop := startUISidecar(t, zkc.Servers(), root, addr)

	page.Call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false})
	page.Call(t, "Page.navigate", map[string]any{"url": car.Base + "/ui/"})
	page.Await(t, 10*time.Second, "the page is live", `location.pathname === "/ui/" && document.readyState === "complete" &&
		document.body.dataset.connected === "true" && document.querySelector("#status").dataset.state === "connected"`)

	// A lock taken by the test shows within a second: three times, each a new
	// holder of x (its fencing token tells them apart), released in between.
	var lockShown []time.Duration
	for i := range 3 {
		start := time.Now()
		g := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/x?owner=ui-test")
		token := fmt.Sprint(sidecartest.Num(g.Body["fencingToken"]))
		page.Await(t, 5*time.Second, "lock x held by ui-test with token "+token,
			uiField("lock", "x", "owner")+` === "ui-test" && `+uiField("lock", "x", "token")+` === "`+token+`"`)
		lockShown = append(lockShown, time.Since(start))
		if i < 2 { // released: the page shows x free or gone
			car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/x?lease="+sidecartest.Str(g.Body["lease"]))
			page.Await(t, 5*time.Second, "lock x released", `(`+uiField("lock", "x", "token")+` ?? "—") === "—"`)
		}
	}
	browsertest.LogLatency(t, "lock shown", lockShown)

	// A change of leader shows within a second: three times the leader of an
	// election with two candidates resigns, and enrols again behind the other.
	leases := map[string]string{}
	for _, c := range []string{"c1", "c2"} {
		leases[c] = sidecartest.Str(uiCandidate(t, car, "primary", c, "10.0.0."+c[1:]+":5432").Body["lease"])
	}
	var leaderShown []time.Duration
	leader, next := "c1", "c2"
	for range 3 {
		page.Await(t, 5*time.Second, leader+" sidecartest.Leads primary, "+next+" in line", `(() => {
			const r = document.querySelector('[data-election="primary"]');
			return !!r && r.querySelector('[data-field="leader"]').dataset.leader === "`+leader+`" &&
				[...r.querySelectorAll("li[data-candidate]")].map(li => li.dataset.candidate).join() === "`+leader+","+next+`";
		})()`)
		start := time.Now()
		car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/primary/candidates/"+leader+"?lease="+leases[leader])
		page.Await(t, 5*time.Second, next+" sidecartest.Leads primary", `(() => {
			const r = document.querySelector('[data-election="primary"]');
			return !!r && r.querySelector('[data-field="leader"]').dataset.leader === "`+next+`" &&
				r.querySelectorAll("li[data-candidate]").length === 1;
		})()`)
		leaderShown = append(leaderShown, time.Since(start))
		leases[leader] = sidecartest.Str(uiCandidate(t, car, "primary", leader, "10.0.0."+leader[1:]+":5432").Body["lease"])
		leader, next = next, leader
	}
	browsertest.LogLatency(t, "leader change shown", leaderShown)

	// A realistic picture: a second lock with a waiter, an election with three
	// candidates, a throughput group, a queue with a claimed item, barriers.
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/db-migrations?owner=deploy-7f3c")
	waitCtx, cancelWait := context.WithCancel(context.Background())
	waiterDone := make(chan struct{})
	t.Cleanup(func() { cancelWait(); <-waiterDone })
	go func() { // answered when the sidecar stops; never calls t.Fatal
		defer close(waiterDone)
		_, _ = car.Do(waitCtx, http.MethodPost, "/v1/locks/db-migrations?wait=60s&owner=deploy-8a1d", nil)
	}()
	for i, id := range []string{"node-a", "node-b", "node-c"} {
		uiCandidate(t, car, "scheduler", id, fmt.Sprintf("10.0.1.%d:9000", 11+i))
	}
	r, err := car.Do(context.Background(), http.MethodPut, "/v1/throughput/api-egress", strings.NewReader(`{"limit":1000}`), "Content-Type", "application/json")
	if err != nil || r.Status != http.StatusOK {
		t.Fatalf("PUT /v1/throughput/api-egress: %v %+v", err, r)
	}
	for _, m := range []struct{ id, weight string }{{"m1", "1"}, {"m2", "1"}, {"m3", "2"}} {
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/throughput/api-egress/members?id="+m.id+"&weight="+m.weight+"&ttl=60s")
	}
	for i := range 4 {
		uiEnqueue(t, car, "", fmt.Sprintf(`{"job":%d}`, i))
	}
	car.Must(t, http.StatusOK, http.MethodPost, "/v1/queues/jobs/claims?ttl=60s")
	uiEnqueue(t, car, "?delay=1h", `{"job":"later"}`)
	car.Must(t, http.StatusNoContent, http.MethodPut, "/v1/barriers/deploy-freeze")
	car.Must(t, http.StatusNoContent, http.MethodPut, "/v1/barriers/maintenance")
	for _, id := range []string{"w1", "w2"} {
		car.Must(t, http.StatusConflict, http.MethodPost, "/v1/double-barriers/batch-start/participants?count=3&ttl=60s&id="+id)
	}
	car.MustPut(t, "/v1/kv/feature-flags", []byte(`{"dark":false}`), "application/json")
	car.MustPut(t, "/v1/kv/feature-flags", []byte(`{"dark":true}`), "application/json")
	car.Must(t, http.StatusOK, http.MethodPost, "/v1/counters/signups?add=42")
	uiSemaphoreAndRWLock(t, car)
	car.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/web/members?id=w1&ttl=60s", `{"value":"10.0.0.1:80"}`)
	car.Send(t, http.StatusCreated, http.MethodPost, "/v1/groups/web/members?id=w2&ttl=60s", `{"value":"10.0.0.2:80"}`)
	car.Send(t, http.StatusOK, http.MethodPut, "/v1/partitions/orders", `{"count":6}`)
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/partitions/orders/members?id=p1&ttl=60s")
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/partitions/orders/members?id=p2&ttl=60s")
	car.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/checkout/instances/i1?ttl=60s", `{"address":"10.0.2.1","port":8080}`)
	page.Await(t, 5*time.Second, "the whole picture", `(() => {
		const q = s => document.querySelector(s);
		if (document.querySelectorAll('[data-membership="web"] li[data-member]').length !== 2 ||
			q('[data-service="checkout"] li[data-instance="i1"] .val')?.textContent !== "10.0.2.1:8080" ||
			q('[data-partitions="orders"] [data-field="leader"]')?.textContent !== "p1" ||
			q('[data-partitions="orders"] li[data-member="p2"]')?.dataset.owned !== "0") return false;
		const pct = [...document.querySelectorAll('[data-group="api-egress"] tr[data-member] .bar')].map(b => b.dataset.pct).join();
		return q('[data-lock="db-migrations"] [data-field="waiters"]')?.textContent === "1" &&
			document.querySelectorAll('[data-election="scheduler"] li[data-candidate]').length === 3 &&
			q('[data-election="scheduler"] [data-field="leader"]')?.dataset.leader === "node-a" &&
			q('[data-group="api-egress"] [data-field="limit"]')?.textContent === "1000" &&
			pct === "25.00,25.00,50.00" &&
			q('[data-group="api-egress"] tr.leader[data-member]') !== null &&
			q('[data-queue="jobs"] [data-field="length"]')?.textContent === "4" &&
			q('[data-queue="jobs"] [data-field="delayed"]')?.textContent === "1" &&
			q('[data-queue="jobs"] [data-field="claimed"]')?.textContent === "1" &&
			q('[data-barrier="maintenance"]') !== null &&
			q('[data-double-barrier="batch-start"] [data-field="entered"]')?.textContent === "2 / 3" &&
			q('[data-key="feature-flags"] [data-field="version"]')?.textContent === "1" &&
			q('[data-key="feature-flags"] [data-field="size"]')?.textContent === "13" &&
			q('[data-counter="signups"] [data-field="value"]')?.textContent === "42" &&
			q('[data-semaphore="payments"] [data-field="held"]')?.textContent === "2" &&
			/2 readers/.test(q('[data-rwlock="schema"] [data-field="held"]')?.textContent || "");
	})()`)
	// The bars are drawn: their width follows share/limit.
	if w := page.Eval(t, `Math.round(document.querySelector('[data-group="api-egress"] tr[data-member="m3"] .fill').getBoundingClientRect().width /
		document.querySelector('[data-group="api-egress"] tr[data-member="m3"] .bar').getBoundingClientRect().width * 100)`); w != 50.0 {
		t.Errorf("m3's bar fills %v%% of its track, want 50", w)
	}
	// A deletion: the lowered barrier leaves the page.
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/barriers/maintenance")
	page.Await(t, 5*time.Second, "the lowered barrier gone", `document.querySelector('[data-barrier="maintenance"]') === null && document.querySelector('[data-barrier="deploy-freeze"]') !== null`)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/feature-flags")
	page.Await(t, 5*time.Second, "the deleted key gone", `document.querySelector('[data-key="feature-flags"]') === null && document.querySelector('[data-counter="signups"]') !== null`)

	if p := page.Problems(false); len(p) > 0 {
		t.Errorf("console errors while connected:\n%s", strings.Join(p, "\n"))
	}
	if os.Getenv("UI_SCREENSHOT") == "1" {
		page.Screenshot(t, filepath.Join("..", "docs", "ui.png"))
	}

	// The session suspended: the stream is up, the page still says disconnected.
	zkc.Kill(0)
	start := time.Now()
	page.Await(t, 10*time.Second, "disconnected while the session is suspended", uiDisconnected+` &&
		document.querySelector("#conn").dataset.conn === "live" && /session is suspended/.test(document.querySelector("#banner").textContent)`)
	t.Logf("suspended session shown after %d ms", time.Since(start).Milliseconds())
	// Suspension is not loss: the election keeps the leader it last knew, tagged
	// suspended (until the session could have expired, seconds away).
	page.Await(t, 5*time.Second, "the scheduler election's last known leader, tagged suspended", `(() => {
		const q = (s) => document.querySelector(s);
		return q('[data-election="scheduler"]')?.dataset.suspended === "true" &&
			q('[data-election="scheduler"] [data-field="leader"]')?.dataset.leader === "node-a" &&
			/^suspended/.test(q('[data-election="scheduler"] [data-field="suspended"]')?.textContent || "");
	})()`)
	zkc.Restart(0)
	page.Await(t, 15*time.Second, "connected again with the session back", `document.body.dataset.connected === "true" && document.querySelector("#banner").hidden`)

	// The sidecar stops: the stream ends, the page says so.
	start = time.Now()
	stop()
	page.Await(t, 10*time.Second, "disconnected once the sidecar stopped", uiDisconnected+` &&
		document.querySelector("#conn").dataset.conn === "disconnected" && document.querySelector("#status").dataset.stale === "true"`)
	t.Logf("stopped sidecar shown after %d ms", time.Since(start).Milliseconds())
	select {
	case <-waiterDone:
	case <-time.After(10 * time.Second):
		t.Error("the lock waiter was not answered at shutdown")
	}

	// Back again: the page reconnects by itself and rebuilds from the stream, so
	// what ended with the old sidecar's session (holders, candidates, members,
	// the claim) is gone from the page, and what persists is shown.
	startUISidecar(t, zkc.Servers(), root, addr)
	page.Await(t, 15*time.Second, "rebuilt after the sidecar came back", `(() => {
		const q = s => document.querySelector(s);
		return document.body.dataset.connected === "true" && q("#banner").hidden &&
			q('[data-queue="jobs"] [data-field="length"]')?.textContent === "5" &&
			q('[data-queue="jobs"] [data-field="delayed"]')?.textContent === "1" &&
			q('[data-queue="jobs"] [data-field="claimed"]')?.textContent === "0" &&
			q('[data-lock="x"][data-held="true"]') === null &&
			document.querySelectorAll("li[data-candidate], tr[data-member]").length === 0;
	})()`)
	if p := page.Problems(true); len(p) > 0 {
		t.Errorf("script errors:\n%s", strings.Join(p, "\n"))
	}
}

// uiDisconnected holds while the page shows itself disconnected.
const uiDisconnected = `(document.body.dataset.connected === "false" && document.body.classList.contains("offline") &&
	!document.querySelector("#banner").hidden && /disconnected/i.test(document.querySelector("#banner").textContent))`

// uiField is the JS text content of one field of an entity's row.
func uiField(kind, name, field string) string {
	n, _ := json.Marshal(name)
	f, _ := json.Marshal(field)
	return fmt.Sprintf(`document.querySelector('[data-%s=' + JSON.stringify(%s) + '] [data-field=' + JSON.stringify(%s) + ']')?.textContent`, kind, n, f)
}

// uiCandidate enrols a candidate with a value.
func uiCandidate(t *testing.T, car *sidecartest.Sidecar, election, id, value string) *sidecartest.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]string{"value": value})
	r, err := car.Do(context.Background(), http.MethodPost, "/v1/elections/"+election+"/candidates?ttl=60s&id="+id, strings.NewReader(string(body)), "Content-Type", "application/json")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("campaign %s in %s: %v %+v", id, election, err, r)
	}
	return r
}

// startUISidecar runs the real Main in process on addr; stop closes it (once; it
// also runs in Cleanup).
func startUISidecar(t *testing.T, servers []string, root, addr string) (*sidecartest.Sidecar, func()) {
	t.Helper()
	m := sidecar.NewMain()
	m.LogOutput = io.Discard
	if testing.Verbose() && os.Getenv("SIDECAR_LOGS") != "" {
		m.LogOutput = os.Stderr
	}
	// 10s: a suspension shows its last known state for more than 6s (2/3 of it),
	// time for the page to be checked.
	args := []string{"--listen", addr, "--zk", strings.Join(servers, ","), "--zk-root", root, "--session-timeout", "10s"}
	if err := m.ParseFlags(args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = m.Close() }) }
	t.Cleanup(stop)
	car := &sidecartest.Sidecar{M: m, Base: "http://" + m.Addr()}
	car.WaitReady(t)
	return car, stop
}

// read/write lock with two readers.
func uiSemaphoreAndRWLock(t *testing.T, car *sidecartest.Sidecar) {
	for _, w := range []string{"worker-1", "worker-2"} {
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/payments/permits?max=3&ttl=60s&owner="+w)
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/schema?mode=read&ttl=60s&owner=report-"+w)
	}
}

// uiEnqueue enqueues the JSON item body to the queue jobs, with query.
func uiEnqueue(t *testing.T, car *sidecartest.Sidecar, query, body string) {
	t.Helper()
	r, err := car.Do(context.Background(), http.MethodPost, "/v1/queues/jobs/items"+query, strings.NewReader(body), "Content-Type", "application/json")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("enqueue%s: %v %+v", query, err, r)
	}
}
