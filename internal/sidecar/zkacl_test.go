package sidecar_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/browsertest"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Open ACLs are said out loud (issue 24, item 2): with credentials, a root or
// recipe parent that someone else created open to anyone is warned of,
// counted, shown on GET /v1/session, and with --zk-require-acl keeps the
// sidecar unready until an operator closes it.

// startLoggedSidecar is runSidecar with its log kept in the returned buffer.
func startLoggedSidecar(t *testing.T, servers []string, root string, extra ...string) (*sidecartest.Sidecar, *sidecartest.SyncBuffer) {
	t.Helper()
	logs := &sidecartest.SyncBuffer{}
	m := sidecar.NewMain()
	m.LogOutput = logs
	args := append([]string{"--listen", "127.0.0.1:0", "--zk", strings.Join(servers, ","), "--zk-root", root, "--session-timeout", "2s"}, extra...)
	if err := m.ParseFlags(args, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return &sidecartest.Sidecar{M: m, Base: "http://" + m.Addr()}, logs
}

// createOpen creates the nodes paths, in order, with an ACL open to anyone,
// as a client without credentials would before the sidecar's first start.
func createOpen(t *testing.T, c *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}
}

// closeACL sets the creator-only ACL of the credentials c authenticated with on
// each of paths: what docs/SECURITY.md tells an operator to do
// (setAcl <path> auth::cdrwa).
func closeACL(t *testing.T, c *zk.Conn, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := c.SetACL(p, zk.AuthACL(zk.PermAll), -1); err != nil {
			t.Fatalf("setAcl %s: %v", p, err)
		}
	}
}

// openACLs returns GET /v1/session's openAcls, and whether it is there.
func openACLs(t *testing.T, car *sidecartest.Sidecar) ([]string, bool) {
	t.Helper()
	v, ok := car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["openAcls"]
	if !ok {
		return nil, false
	}
	list, _ := v.([]any)
	out := []string{}
	for _, p := range list {
		out = append(out, sidecartest.Str(p))
	}
	return out, true
}

// warnings returns the log's warnings of an open node at path.
func openWarnings(logs *sidecartest.SyncBuffer, path string) int {
	n := 0
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "open to anyone") &&
			strings.Contains(line, `"path":"`+path+`"`) {
			n++
		}
	}
	return n
}

// A root, and a recipe parent under it, made open by an anonymous client
// before the sidecar's first start: the sidecar with credentials warns of
// each once (naming what anyone may do and the fix), counts them, and lists
// them on GET /v1/session, while staying ready (no --zk-require-acl). Once an
// operator closes them, they are no longer listed nor counted.
func TestZKOpenACLWarned(t *testing.T) {
	t.Parallel() // mostly waiting for the ACL checks and the page's poll: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	createOpen(t, sidecartest.ZkClient(t, zkc.Servers(), ""), root, root+"/locks")

	car, logs := startLoggedSidecar(t, zkc.Servers(), root, "--zk-auth", sidecartest.AppAuth)
	car.WaitReady(t)
	want := []string{root, root + "/locks"}
	testutil.Eventually(t, 20*time.Second, "GET /v1/session lists the open root and locks parent", func() bool {
		got, _ := openACLs(t, car)
		return slices.Equal(got, want)
	})
	if n := sidecartest.Metrics(t, car, "coord_zk_open_acl_nodes")[0]; n != 2 {
		t.Fatalf("coord_zk_open_acl_nodes = %v, want 2", n)
	}
	// The log is written in batches: its lines may follow the session's
	// answer by a moment.
	testutil.Eventually(t, 20*time.Second, "a warning for each open node in the log", func() bool {
		for _, p := range want {
			if openWarnings(logs, p) == 0 {
				return false
			}
		}
		return true
	})
	for _, p := range want {
		if n := openWarnings(logs, p); n != 1 {
			t.Fatalf("%d warnings of %s open, want 1; log:\n%s", n, p, logs)
		}
	}
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, `"path":"`+root+`"`) && strings.Contains(line, "open to anyone") &&
			(!strings.Contains(line, `"world":"cdrwa"`) || !strings.Contains(line, "setAcl")) {
			t.Fatalf("the warning names neither what anyone may do nor the fix: %s", line)
		}
	}
	// A lock works meanwhile; the lock's own node under locks is the
	// sidecar's, creator-only, and not listed.
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/a?ttl=30s")

	closeACL(t, sidecartest.ZkClient(t, zkc.Servers(), "app:s3cret"), want...)
	testutil.Eventually(t, 30*time.Second, "GET /v1/session lists nothing open once closed", func() bool {
		got, ok := openACLs(t, car)
		return ok && len(got) == 0
	})
	if n := sidecartest.Metrics(t, car, "coord_zk_open_acl_nodes")[0]; n != 0 {
		t.Fatalf("coord_zk_open_acl_nodes = %v once closed, want 0", n)
	}
	for _, p := range want {
		if n := openWarnings(logs, p); n != 1 {
			t.Fatalf("%d warnings of %s open, want 1 (once per node and session); log:\n%s", n, p, logs)
		}
	}
}

// With --zk-require-acl the sidecar stays unready while its root is open to
// anyone (the answer says why), although its session is connected, and
// becomes ready once an operator closes the root.
func TestZKRequireACL(t *testing.T) {
	t.Parallel() // mostly waiting for the ACL checks and the page's poll: see TestMain
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	createOpen(t, sidecartest.ZkClient(t, zkc.Servers(), ""), root)

	car, logs := startLoggedSidecar(t, zkc.Servers(), root, "--zk-auth", sidecartest.AppAuth, "--zk-require-acl")
	var last *sidecartest.Response
	testutil.Eventually(t, 20*time.Second, "/readyz answers 503 zookeeper-acl-open naming the root", func() bool {
		r, err := car.Do(context.Background(), http.MethodGet, "/readyz", nil)
		last = r
		return err == nil && r.Status == http.StatusServiceUnavailable &&
			strings.HasSuffix(sidecartest.Str(r.Body["type"]), "/zookeeper-acl-open") && strings.Contains(sidecartest.Str(r.Body["detail"]), root)
	})
	if st := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["state"]); st != "connected" {
		t.Fatalf("session %s, want connected", st)
	}
	if r, err := car.Do(context.Background(), http.MethodGet, "/readyz", nil); err != nil || r.Status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the root open and the session connected: %v %v, want 503", r, err)
	}
	// The warning is written by the same check that made /readyz answer 503,
	// through the batched log: it may reach the log a moment later.
	testutil.Eventually(t, 10*time.Second, "the log says why the sidecar is not ready", func() bool {
		return strings.Contains(logs.String(), "--zk-require-acl") && openWarnings(logs, root) == 1
	})
	t.Logf("while open: %s", last.Raw)

	closeACL(t, sidecartest.ZkClient(t, zkc.Servers(), "app:s3cret"), root)
	car.WaitReady(t)
	if got, _ := openACLs(t, car); len(got) != 0 {
		t.Fatalf("openAcls %v once closed", got)
	}
}

// A root the sidecar creates itself carries its creator-only ACL, and so do
// the recipe parents: a second sidecar started on them finds nothing open,
// warns of nothing, and --zk-require-acl lets it be ready.
func TestZKOwnRootNotOpen(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	a, aLogs := startLoggedSidecar(t, zkc.Servers(), root, "--zk-auth", sidecartest.AppAuth, "--zk-require-acl")
	a.WaitReady(t)
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/a?ttl=30s")
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/elections/e/candidates?id=c1&ttl=30s")
	app := sidecartest.ZkClient(t, zkc.Servers(), "app:s3cret")
	for _, p := range []string{root, root + "/locks", root + "/elections"} {
		acl, _, err := app.GetACL(p)
		if err != nil || len(acl) != 1 || acl[0].Scheme != "digest" {
			t.Fatalf("ACL of %s: %v %v, want one digest entry", p, acl, err)
		}
	}

	// b's first check reads the root and parents a made.
	b, bLogs := startLoggedSidecar(t, zkc.Servers(), root, "--zk-auth", sidecartest.AppAuth, "--zk-require-acl")
	b.WaitReady(t)
	for _, car := range []*sidecartest.Sidecar{a, b} {
		got, ok := openACLs(t, car)
		if !ok || len(got) != 0 {
			t.Fatalf("%s: openAcls = %v (present %v), want present and empty", car.Base, got, ok)
		}
		if n := sidecartest.Metrics(t, car, "coord_zk_open_acl_nodes")[0]; n != 0 {
			t.Fatalf("%s: coord_zk_open_acl_nodes = %v, want 0", car.Base, n)
		}
	}
	for _, logs := range []*sidecartest.SyncBuffer{aLogs, bLogs} {
		if strings.Contains(logs.String(), "open to anyone") {
			t.Fatalf("a warning of an open node:\n%s", logs)
		}
	}
}

// --zk-require-acl without credentials cannot be kept: the sidecar refuses to
// start, from the flag or from the environment.
func TestZKRequireACLNeedsCredentials(t *testing.T) {
	args := []string{"--zk", "127.0.0.1:1", "--zk-require-acl"}
	err := sidecar.NewMain().ParseFlags(args, func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "--zk-require-acl needs --zk-auth") {
		t.Fatalf("--zk-require-acl alone: %v", err)
	}
	env := map[string]string{"COORD_ZK_REQUIRE_ACL": "true"}
	err = sidecar.NewMain().ParseFlags([]string{"--zk", "127.0.0.1:1"}, func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "--zk-require-acl needs --zk-auth") {
		t.Fatalf("COORD_ZK_REQUIRE_ACL=true alone: %v", err)
	}
	env["COORD_ZK_REQUIRE_ACL"] = "maybe"
	if err := sidecar.NewMain().ParseFlags([]string{"--zk", "127.0.0.1:1", "--zk-auth", sidecartest.AppAuth}, func(k string) string { return env[k] }); err == nil {
		t.Fatal("COORD_ZK_REQUIRE_ACL=maybe accepted")
	}
	env["COORD_ZK_REQUIRE_ACL"] = "1"
	if err := sidecar.NewMain().ParseFlags([]string{"--zk", "127.0.0.1:1", "--zk-auth", sidecartest.AppAuth}, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("COORD_ZK_REQUIRE_ACL=1 with credentials: %v", err)
	}
	if err := sidecar.NewMain().ParseFlags([]string{"--zk", "127.0.0.1:1", "--zk-auth", sidecartest.AppAuth, "--zk-require-acl"}, func(string) string { return "" }); err != nil {
		t.Fatalf("--zk-require-acl with credentials: %v", err)
	}
}

// The status page says so while the root is open to anyone, naming it, and
// stops saying so once it is closed.
func TestStatusPageOpenACL(t *testing.T) {
	t.Parallel() // mostly waiting for the ACL checks and the page's poll: see TestMain
	if testing.Short() {
		t.Skip("drives a headless Chromium")
	}
	page := browsertest.Start(t)
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	createOpen(t, sidecartest.ZkClient(t, zkc.Servers(), ""), root)
	car, _ := startLoggedSidecar(t, zkc.Servers(), root, "--zk-auth", sidecartest.AppAuth)
	car.WaitReady(t)

	page.Call(t, "Page.navigate", map[string]any{"url": car.Base + "/ui/"})
	page.Await(t, 30*time.Second, "the page warns that the root is open", `(() => {
		const a = document.querySelector("#acl");
		return !!a && !a.hidden && a.dataset.open === "`+root+`" && a.innerText.includes("`+root+`") &&
			getComputedStyle(a).display !== "none";
	})()`)
	closeACL(t, sidecartest.ZkClient(t, zkc.Servers(), "app:s3cret"), root)
	page.Await(t, 40*time.Second, "the warning is gone once the root is closed", `(() => {
		const a = document.querySelector("#acl");
		return !!a && a.hidden && a.dataset.open === "" && getComputedStyle(a).display === "none";
	})()`)
	if p := page.Problems(false); len(p) > 0 {
		t.Fatalf("the page reported problems: %v", p)
	}
}
