package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
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
	page := startUIBrowser(t)
	zkc := zktest.StartStandalone(t) // its own server: the test stops it
	root := zktest.Root(t)
	addr := freeAddr(t)
	car, stop := startUISidecar(t, zkc.Servers(), root, addr)

	page.call(t, "Emulation.setDeviceMetricsOverride", map[string]any{"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": false})
	page.call(t, "Page.navigate", map[string]any{"url": car.Base + "/ui/"})
	page.await(t, 10*time.Second, "the page is live", `location.pathname === "/ui/" && document.readyState === "complete" &&
		document.body.dataset.connected === "true" && document.querySelector("#status").dataset.state === "connected"`)

	// A lock taken by the test shows within a second: three times, each a new
	// holder of x (its fencing token tells them apart), released in between.
	var lockShown []time.Duration
	for i := range 3 {
		start := time.Now()
		g := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/x?owner=ui-test")
		token := fmt.Sprint(sidecartest.Num(g.Body["fencingToken"]))
		page.await(t, 5*time.Second, "lock x held by ui-test with token "+token,
			uiField("lock", "x", "owner")+` === "ui-test" && `+uiField("lock", "x", "token")+` === "`+token+`"`)
		lockShown = append(lockShown, time.Since(start))
		if i < 2 { // released: the page shows x free or gone
			car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/x?lease="+sidecartest.Str(g.Body["lease"]))
			page.await(t, 5*time.Second, "lock x released", `(`+uiField("lock", "x", "token")+` ?? "—") === "—"`)
		}
	}
	uiLatency(t, "lock shown", lockShown)

	// A change of leader shows within a second: three times the leader of an
	// election with two candidates resigns, and enrols again behind the other.
	leases := map[string]string{}
	for _, c := range []string{"c1", "c2"} {
		leases[c] = sidecartest.Str(uiCandidate(t, car, "primary", c, "10.0.0."+c[1:]+":5432").Body["lease"])
	}
	var leaderShown []time.Duration
	leader, next := "c1", "c2"
	for range 3 {
		page.await(t, 5*time.Second, leader+" leads primary, "+next+" in line", `(() => {
			const r = document.querySelector('[data-election="primary"]');
			return !!r && r.querySelector('[data-field="leader"]').dataset.leader === "`+leader+`" &&
				[...r.querySelectorAll("li[data-candidate]")].map(li => li.dataset.candidate).join() === "`+leader+","+next+`";
		})()`)
		start := time.Now()
		car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/primary/candidates/"+leader+"?lease="+leases[leader])
		page.await(t, 5*time.Second, next+" leads primary", `(() => {
			const r = document.querySelector('[data-election="primary"]');
			return !!r && r.querySelector('[data-field="leader"]').dataset.leader === "`+next+`" &&
				r.querySelectorAll("li[data-candidate]").length === 1;
		})()`)
		leaderShown = append(leaderShown, time.Since(start))
		leases[leader] = sidecartest.Str(uiCandidate(t, car, "primary", leader, "10.0.0."+leader[1:]+":5432").Body["lease"])
		leader, next = next, leader
	}
	uiLatency(t, "leader change shown", leaderShown)

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
		r, err := car.Do(context.Background(), http.MethodPost, "/v1/queues/jobs/items", strings.NewReader(fmt.Sprintf(`{"job":%d}`, i)), "Content-Type", "application/json")
		if err != nil || r.Status != http.StatusCreated {
			t.Fatalf("enqueue: %v %+v", err, r)
		}
	}
	car.Must(t, http.StatusOK, http.MethodPost, "/v1/queues/jobs/claims?ttl=60s")
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
	page.await(t, 5*time.Second, "the whole picture", `(() => {
		const q = s => document.querySelector(s);
		if (document.querySelectorAll('[data-membership="web"] li[data-member]').length !== 2 ||
			q('[data-partitions="orders"] [data-field="leader"]')?.textContent !== "p1" ||
			q('[data-partitions="orders"] li[data-member="p2"]')?.dataset.owned !== "0") return false;
		const pct = [...document.querySelectorAll('[data-group="api-egress"] tr[data-member] .bar')].map(b => b.dataset.pct).join();
		return q('[data-lock="db-migrations"] [data-field="waiters"]')?.textContent === "1" &&
			document.querySelectorAll('[data-election="scheduler"] li[data-candidate]').length === 3 &&
			q('[data-election="scheduler"] [data-field="leader"]')?.dataset.leader === "node-a" &&
			q('[data-group="api-egress"] [data-field="limit"]')?.textContent === "1000" &&
			pct === "25.00,25.00,50.00" &&
			q('[data-group="api-egress"] tr.leader[data-member]') !== null &&
			q('[data-queue="jobs"] [data-field="length"]')?.textContent === "3" &&
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
	if w := page.eval(t, `Math.round(document.querySelector('[data-group="api-egress"] tr[data-member="m3"] .fill').getBoundingClientRect().width /
		document.querySelector('[data-group="api-egress"] tr[data-member="m3"] .bar').getBoundingClientRect().width * 100)`); w != 50.0 {
		t.Errorf("m3's bar fills %v%% of its track, want 50", w)
	}
	// A deletion: the lowered barrier leaves the page.
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/barriers/maintenance")
	page.await(t, 5*time.Second, "the lowered barrier gone", `document.querySelector('[data-barrier="maintenance"]') === null && document.querySelector('[data-barrier="deploy-freeze"]') !== null`)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/kv/feature-flags")
	page.await(t, 5*time.Second, "the deleted key gone", `document.querySelector('[data-key="feature-flags"]') === null && document.querySelector('[data-counter="signups"]') !== null`)

	if p := page.problems(false); len(p) > 0 {
		t.Errorf("console errors while connected:\n%s", strings.Join(p, "\n"))
	}
	if os.Getenv("UI_SCREENSHOT") == "1" {
		page.screenshot(t, filepath.Join("..", "..", "docs", "ui.png"))
	}

	// The session suspended: the stream is up, the page still says disconnected.
	zkc.Kill(0)
	start := time.Now()
	page.await(t, 10*time.Second, "disconnected while the session is suspended", uiDisconnected+` &&
		document.querySelector("#conn").dataset.conn === "live" && /session is suspended/.test(document.querySelector("#banner").textContent)`)
	t.Logf("suspended session shown after %d ms", time.Since(start).Milliseconds())
	// Suspension is not loss: the election keeps the leader it last knew, tagged
	// suspended (until the session could have expired, seconds away).
	page.await(t, 5*time.Second, "the scheduler election's last known leader, tagged suspended", `(() => {
		const q = (s) => document.querySelector(s);
		return q('[data-election="scheduler"]')?.dataset.suspended === "true" &&
			q('[data-election="scheduler"] [data-field="leader"]')?.dataset.leader === "node-a" &&
			/^suspended/.test(q('[data-election="scheduler"] [data-field="suspended"]')?.textContent || "");
	})()`)
	zkc.Restart(0)
	page.await(t, 15*time.Second, "connected again with the session back", `document.body.dataset.connected === "true" && document.querySelector("#banner").hidden`)

	// The sidecar stops: the stream ends, the page says so.
	start = time.Now()
	stop()
	page.await(t, 10*time.Second, "disconnected once the sidecar stopped", uiDisconnected+` &&
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
	page.await(t, 15*time.Second, "rebuilt after the sidecar came back", `(() => {
		const q = s => document.querySelector(s);
		return document.body.dataset.connected === "true" && q("#banner").hidden &&
			q('[data-queue="jobs"] [data-field="length"]')?.textContent === "4" &&
			q('[data-queue="jobs"] [data-field="claimed"]')?.textContent === "0" &&
			q('[data-lock="x"][data-held="true"]') === null &&
			document.querySelectorAll("li[data-candidate], tr[data-member]").length === 0;
	})()`)
	if p := page.problems(true); len(p) > 0 {
		t.Errorf("script errors:\n%s", strings.Join(p, "\n"))
	}
}

// uiLatency logs how long the page took to show a change, each time. It asserts
// nothing: that each change showed is the await's (bounded only for a failure),
// and how fast is make bench's (BenchmarkPicture10k's change-ms): on a busy
// 2-core machine under -race a median of a second says nothing of the page.
func uiLatency(t *testing.T, what string, took []time.Duration) {
	t.Helper()
	ms := make([]string, len(took))
	for i, d := range took {
		ms[i] = fmt.Sprintf("%d ms", d.Milliseconds())
	}
	sorted := slices.Clone(took)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	t.Logf("%s after %s (median %d ms)", what, strings.Join(ms, ", "), median.Milliseconds())
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

const uiChromium = "/usr/bin/chromium"

// uiPage is one page of a headless Chromium under the DevTools protocol.
type uiPage struct {
	ws *wsConn

	mu       sync.Mutex
	nextID   int64
	pending  map[int64]chan cdpReply
	readErr  error
	messages []uiMessage // console errors, exceptions and error log entries
	requests []string    // the URL of every request the page made (with Network.enable)
	done     chan struct{}
}

type uiMessage struct {
	text    string
	network bool // a failed request, as when the sidecar is down
}

type cdpReply struct {
	result json.RawMessage
	err    error
}

// startUIBrowser starts Chromium with a page and connects to it; Chromium is
// killed and its profile removed in Cleanup.
func startUIBrowser(t testing.TB) *uiPage {
	t.Helper()
	pageWS := uiPageTarget(t, startChromium(t))
	ws, err := wsDial(pageWS)
	if err != nil {
		t.Fatalf("DevTools websocket %s: %v", pageWS, err)
	}
	p := &uiPage{ws: ws, pending: map[int64]chan cdpReply{}, done: make(chan struct{})}
	go p.readLoop()
	t.Cleanup(func() {
		_ = ws.close()
		<-p.done
	})
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		p.call(t, m, nil)
	}
	return p
}

// startChromium starts a headless Chromium on about:blank and returns its
// DevTools address; Chromium (with its helpers) is killed and its profile
// removed in Cleanup.
func startChromium(t testing.TB) (browserWS string) {
	t.Helper()
	if _, err := os.Stat(uiChromium); err != nil {
		t.Fatalf("the status page test needs Debian's chromium package (%v): apt-get install chromium (make test installs it), or run with -short to skip", err)
	}
	dir, err := os.MkdirTemp("", "coord-ui-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(uiChromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+dir, "--remote-debugging-port=0", "about:blank")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // one group with its helpers, killed together
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("start %s: %v", uiChromium, err)
	}
	listening := make(chan string, 1)
	exited := make(chan struct{})
	var tailMu sync.Mutex
	var tail []string
	go func() {
		defer close(exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if ws, ok := strings.CutPrefix(line, "DevTools listening on "); ok {
				select {
				case listening <- strings.TrimSpace(ws):
				default:
				}
			}
			tailMu.Lock()
			if tail = append(tail, line); len(tail) > 30 {
				tail = tail[1:]
			}
			tailMu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		_ = cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("chromium (pid %d) did not exit", cmd.Process.Pid)
		}
		_ = os.RemoveAll(dir)
	})
	stderrTail := func() string {
		tailMu.Lock()
		defer tailMu.Unlock()
		return strings.Join(tail, "\n")
	}
	select {
	case browserWS = <-listening:
	case <-exited:
		t.Fatalf("chromium exited before listening:\n%s", stderrTail())
	case <-time.After(20 * time.Second):
		t.Fatalf("chromium did not print its DevTools address within 20s:\n%s", stderrTail())
	}
	return browserWS
}

// uiPageTarget returns the DevTools websocket address of the page target (the
// one started with about:blank) of the Chromium at browserWS.
func uiPageTarget(t testing.TB, browserWS string) (pageWS string) {
	t.Helper()
	u, err := url.Parse(browserWS)
	if err != nil {
		t.Fatalf("DevTools address %q: %v", browserWS, err)
	}
	testutil.Eventually(t, 10*time.Second, "chromium lists its page target", func() bool {
		resp, err := http.Get("http://" + u.Host + "/json/list")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var targets []struct{ Type, WebSocketDebuggerURL string }
		if json.NewDecoder(resp.Body).Decode(&targets) != nil {
			return false
		}
		for _, tg := range targets {
			if tg.Type == "page" && tg.WebSocketDebuggerURL != "" {
				pageWS = tg.WebSocketDebuggerURL
				return true
			}
		}
		return false
	})
	return pageWS
}

// readLoop hands answers to their callers and records the page's errors.
func (p *uiPage) readLoop() {
	defer close(p.done)
	for {
		msg, err := p.ws.readMessage()
		if err != nil {
			p.mu.Lock()
			p.readErr = err
			for id, ch := range p.pending {
				ch <- cdpReply{err: fmt.Errorf("DevTools connection: %w", err)}
				delete(p.pending, id)
			}
			p.mu.Unlock()
			return
		}
		var m struct {
			ID     int64           `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(msg, &m) != nil {
			continue
		}
		if m.ID != 0 {
			p.mu.Lock()
			ch := p.pending[m.ID]
			delete(p.pending, m.ID)
			p.mu.Unlock()
			if ch != nil {
				r := cdpReply{result: m.Result}
				if m.Error != nil {
					r.err = fmt.Errorf("DevTools error %d: %s", m.Error.Code, m.Error.Message)
				}
				ch <- r
			}
			continue
		}
		if m.Method == "Network.requestWillBeSent" {
			p.recordRequest(m.Params)
			continue
		}
		if text, network, ok := cdpProblem(m.Method, m.Params); ok {
			p.mu.Lock()
			p.messages = append(p.messages, uiMessage{text: text, network: network})
			p.mu.Unlock()
		}
	}
}

// cdpProblem turns a console error, an uncaught exception or an error log entry
// into text.
func cdpProblem(method string, params json.RawMessage) (text string, network, ok bool) {
	switch method {
	case "Runtime.consoleAPICalled":
		var ev struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		if json.Unmarshal(params, &ev) != nil || (ev.Type != "error" && ev.Type != "assert") {
			return "", false, false
		}
		var parts []string
		for _, a := range ev.Args {
			if a.Description != "" {
				parts = append(parts, a.Description)
			} else {
				parts = append(parts, fmt.Sprint(a.Value))
			}
		}
		return "console." + ev.Type + ": " + strings.Join(parts, " "), false, true
	case "Runtime.exceptionThrown":
		var ev struct {
			Details struct {
				Text      string `json:"text"`
				URL       string `json:"url"`
				Line      int    `json:"lineNumber"`
				Exception struct {
					Description string `json:"description"`
				} `json:"exception"`
			} `json:"exceptionDetails"`
		}
		_ = json.Unmarshal(params, &ev)
		d := ev.Details
		return fmt.Sprintf("exception at %s:%d: %s %s", d.URL, d.Line+1, d.Text, d.Exception.Description), false, true
	case "Log.entryAdded":
		var ev struct {
			Entry struct {
				Source string `json:"source"`
				Level  string `json:"level"`
				Text   string `json:"text"`
				URL    string `json:"url"`
			} `json:"entry"`
		}
		if json.Unmarshal(params, &ev) != nil || ev.Entry.Level != "error" {
			return "", false, false
		}
		e := ev.Entry
		return fmt.Sprintf("log (%s): %s %s", e.Source, e.Text, e.URL), e.Source == "network", true
	}
	return "", false, false
}

// problems answers the errors recorded so far, without failed requests when
// allowNetwork (they are expected while the sidecar is down).
func (p *uiPage) problems(allowNetwork bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, m := range p.messages {
		if !(allowNetwork && m.network) {
			out = append(out, m.text)
		}
	}
	return out
}

// send issues one DevTools command and waits for its answer; it never calls
// t.Fatal.
func (p *uiPage) send(method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = map[string]any{}
	}
	p.mu.Lock()
	if p.readErr != nil {
		p.mu.Unlock()
		return nil, p.readErr
	}
	p.nextID++
	id := p.nextID
	ch := make(chan cdpReply, 1)
	p.pending[id] = ch
	p.mu.Unlock()
	msg, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err == nil {
		err = p.ws.writeText(msg)
	}
	if err == nil {
		select {
		case r := <-ch:
			return r.result, r.err
		case <-time.After(15 * time.Second):
			err = errors.New("no answer within 15s")
		}
	}
	p.mu.Lock()
	delete(p.pending, id)
	p.mu.Unlock()
	return nil, fmt.Errorf("%s: %w", method, err)
}

func (p *uiPage) call(t testing.TB, method string, params any) json.RawMessage {
	t.Helper()
	r, err := p.send(method, params)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// evalErr evaluates a JS expression in the page and answers its JSON value.
func (p *uiPage) evalErr(expr string) (any, error) {
	raw, err := p.send("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return nil, err
	}
	var r struct {
		Result struct {
			Value any `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if r.Exception != nil {
		return nil, fmt.Errorf("evaluate %s: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	return r.Result.Value, nil
}

func (p *uiPage) eval(t testing.TB, expr string) any {
	t.Helper()
	v, err := p.evalErr(expr)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// await polls a JS condition every 50ms until it is true and answers how long
// that took; past within (made testutil.Patience) the test fails with what the
// page shows.
func (p *uiPage) await(t testing.TB, within time.Duration, what, cond string) time.Duration {
	t.Helper()
	within = testutil.Patience(within)
	start := time.Now()
	deadline := start.Add(within)
	for {
		v, err := p.evalErr(cond)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v == true {
			return time.Since(start)
		}
		if time.Now().After(deadline) {
			text, _ := p.evalErr(`document.body.innerText`)
			t.Fatalf("not within %s: %s; the page shows:\n%v\nconsole: %v", within, what, text, p.problems(false))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// screenshot writes the whole page as a PNG.
func (p *uiPage) screenshot(t *testing.T, path string) {
	t.Helper()
	h, _ := p.eval(t, `document.documentElement.scrollHeight`).(float64)
	raw := p.call(t, "Page.captureScreenshot", map[string]any{
		"format": "png", "captureBeyondViewport": true,
		"clip": map[string]any{"x": 0, "y": 0, "width": 1280, "height": max(h, 800), "scale": 1},
	})
	var r struct {
		Data string `json:"data"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// wsConn is a minimal RFC 6455 Client: text frames out (masked), whole messages
// in (reassembling fragments, answering pings), no extensions.
type wsConn struct {
	c   net.Conn
	br  *bufio.Reader
	wmu sync.Mutex
}

func wsDial(rawURL string) (*wsConn, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "ws" {
		return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodGet})
	if err != nil {
		c.Close()
		return nil, err
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		c.Close()
		return nil, fmt.Errorf("websocket handshake refused: %s", resp.Status)
	}
	_ = c.SetDeadline(time.Time{})
	return &wsConn{c: c, br: br}, nil
}

func (w *wsConn) writeText(b []byte) error { return w.writeFrame(0x1, b) }

func (w *wsConn) writeFrame(op byte, payload []byte) error {
	n := len(payload)
	frame := []byte{0x80 | op} // FIN
	switch {
	case n < 126:
		frame = append(frame, 0x80|byte(n))
	case n <= 0xFFFF:
		frame = append(frame, 0x80|126)
		frame = binary.BigEndian.AppendUint16(frame, uint16(n))
	default:
		frame = append(frame, 0x80|127)
		frame = binary.BigEndian.AppendUint64(frame, uint64(n))
	}
	var mask [4]byte
	_, _ = rand.Read(mask[:])
	frame = append(frame, mask[:]...)
	for i, b := range payload {
		frame = append(frame, b^mask[i%4])
	}
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_, err := w.c.Write(frame)
	return err
}

// readMessage answers the next whole text or binary message.
func (w *wsConn) readMessage() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(w.br, h[:]); err != nil {
			return nil, err
		}
		fin, op := h[0]&0x80 != 0, h[0]&0x0F
		n := uint64(h[1] & 0x7F)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(w.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n > 256<<20 {
			return nil, fmt.Errorf("websocket frame of %d bytes", n)
		}
		var mask []byte
		if h[1]&0x80 != 0 { // servers do not mask, but tolerate it
			mask = make([]byte, 4)
			if _, err := io.ReadFull(w.br, mask); err != nil {
				return nil, err
			}
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(w.br, payload); err != nil {
			return nil, err
		}
		if mask != nil {
			for i := range payload {
				payload[i] ^= mask[i%4]
			}
		}
		switch op {
		case 0x0, 0x1, 0x2: // continuation, text, binary
			msg = append(msg, payload...)
			if fin {
				return msg, nil
			}
		case 0x8:
			return nil, io.EOF
		case 0x9:
			if err := w.writeFrame(0xA, payload); err != nil {
				return nil, err
			}
		case 0xA:
		default:
			return nil, fmt.Errorf("websocket opcode %#x", op)
		}
	}
}

func (w *wsConn) close() error {
	_ = w.writeFrame(0x8, nil)
	return w.c.Close()
}

// uiSemaphoreAndRWLock makes a semaphore with two of three permits held and a
// read/write lock with two readers.
func uiSemaphoreAndRWLock(t *testing.T, car *sidecartest.Sidecar) {
	for _, w := range []string{"worker-1", "worker-2"} {
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/semaphores/payments/permits?max=3&ttl=60s&owner="+w)
		car.Must(t, http.StatusCreated, http.MethodPost, "/v1/rwlocks/schema?mode=read&ttl=60s&owner=report-"+w)
	}
}
