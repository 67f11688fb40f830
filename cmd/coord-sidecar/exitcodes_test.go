package main

import (
	"bytes"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The README's exit-code table is the one the code uses and every --help
// prints (ctl.ExitCodes), word for word, and the README has no other.
func TestREADMEExitCodes(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if !strings.Contains(readme, ctl.ExitTableMarkdown()) {
		t.Fatalf("README.md does not hold the exit-code table of internal/ctl/exits.go; paste it:\n%s", ctl.ExitTableMarkdown())
	}
	if n := strings.Count(readme, "| exit code |"); n != 1 {
		t.Fatalf("README.md has %d exit-code tables, want the one", n)
	}
}

// exitCase is one verb run for one outcome class.
type exitCase struct {
	class string
	car   string // "open", "guarded" (a token), "none" (nothing listens)
	token string // COORD_TOKEN
	stdin string
	args  []string
	want  int
	// stderr, when set, must appear in the run's stderr.
	stderr string
}

// Every verb of the client and every wrapper, for every outcome class that
// applies to it, against real sidecars: the exit code is the one table's.
func TestExitCodesVerbByVerb(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	open := sidecartest.Start(t, zkc.Servers(), root, "--max-body", "1024", "--max-item", "1024", "--session-timeout", "10s")
	guarded := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--token", "s3cret", "--session-timeout", "10s")
	none := freeAddr(t)
	addr := map[string]string{"open": open.M.Addr(), "guarded": guarded.M.Addr(), "none": none}

	// What the cases find: a key, an item, a lease, a counter at the top, a
	// held lock, an elected candidate.
	cli(t, map[string]string{"COORD_ADDR": open.M.Addr()}, "", "kv", "put", "there", "v").want(t, 0, "")
	cli(t, map[string]string{"COORD_ADDR": open.M.Addr()}, "", "counter", "add", "top", "9223372036854775807").want(t, 0, "*")
	open.Must(t, 201, "POST", "/v1/locks/taken?owner=alice")
	open.Must(t, 201, "POST", "/v1/elections/chosen/candidates?id=dup")
	open.Must(t, 204, "PUT", "/v1/barriers/up")
	open.Must(t, 201, "POST", "/v1/semaphores/sfull/permits?max=1&owner=alice")
	open.Must(t, 201, "POST", "/v1/rwlocks/rtaken?mode=write&owner=alice")
	open.Must(t, 201, "POST", "/v1/groups/gtaken/members?id=dup")
	open.Send(t, 201, "PUT", "/v1/services/staken/instances/dup?ttl=10m", `{"address":"10.0.0.1"}`)
	big := strings.Repeat("x", 4096)

	// Every verb: its own successful run (when it has one that ends by
	// itself), then the classes each verb shares.
	type verb struct {
		name  string
		ok    []string // args of a successful run; nil: none ends by itself
		okIn  string
		args  []string // args that reach the sidecar (for the shared classes)
		extra []exitCase
	}
	leaseID := strings.TrimSpace(cli(t, map[string]string{"COORD_ADDR": open.M.Addr()}, "", "lease", "grant", "1m").stdout)
	verbs := []verb{
		{name: "kv get", ok: []string{"kv", "get", "there"}, args: []string{"kv", "get", "k"}, extra: []exitCase{
			{class: "not found", car: "open", args: []string{"kv", "get", "nope"}, want: ctl.ExitNotFound},
			{class: "invalid (400)", car: "open", args: []string{"kv", "get", "bad name"}, want: ctl.ExitUsage},
		}},
		{name: "kv put", ok: []string{"kv", "put", "k", "v"}, args: []string{"kv", "put", "k", "v"}, extra: []exitCase{
			{class: "too large (413)", car: "open", stdin: big, args: []string{"kv", "put", "k"}, want: ctl.ExitUsage},
			{class: "invalid (400)", car: "open", args: []string{"kv", "put", "bad name", "v"}, want: ctl.ExitUsage},
		}},
		{name: "kv delete", ok: []string{"kv", "delete", "k"}, args: []string{"kv", "delete", "k"}, extra: []exitCase{
			{class: "not found", car: "open", args: []string{"kv", "delete", "nope"}, want: ctl.ExitNotFound},
		}},
		{name: "kv watch", args: []string{"kv", "watch", "k"}, extra: []exitCase{
			{class: "invalid (400)", car: "open", args: []string{"kv", "watch", "bad name"}, want: ctl.ExitUsage},
		}},
		{name: "kv watch --prefix", args: []string{"kv", "watch", "--prefix", "p/"}, extra: []exitCase{
			{class: "usage (KEY and --prefix)", car: "open", args: []string{"kv", "watch", "--prefix", "p/", "k"}, want: ctl.ExitUsage},
			{class: "usage (neither)", car: "open", args: []string{"kv", "watch"}, want: ctl.ExitUsage},
		}},
		{name: "counter get", ok: []string{"counter", "get", "c"}, args: []string{"counter", "get", "c"}, extra: []exitCase{
			{class: "invalid (400)", car: "open", args: []string{"counter", "get", "bad name"}, want: ctl.ExitUsage},
		}},
		{name: "counter add", ok: []string{"counter", "add", "c", "2"}, args: []string{"counter", "add", "c"}, extra: []exitCase{
			{class: "conflict (409 overflow)", car: "open", args: []string{"counter", "add", "top"}, want: ctl.ExitConflict},
			{class: "usage (DELTA)", car: "open", args: []string{"counter", "add", "c", "1.5"}, want: ctl.ExitUsage},
		}},
		{name: "queue put", ok: []string{"queue", "put", "q", "one"}, args: []string{"queue", "put", "q", "x"}, extra: []exitCase{
			{class: "too large (413)", car: "open", stdin: big, args: []string{"queue", "put", "q"}, want: ctl.ExitUsage},
			{class: "invalid (400: empty)", car: "open", args: []string{"queue", "put", "q"}, want: ctl.ExitUsage},
		}},
		{name: "queue take", ok: []string{"queue", "take", "q"}, args: []string{"queue", "take", "q"}, extra: []exitCase{
			{class: "not found (empty)", car: "open", args: []string{"queue", "take", "empty"}, want: ctl.ExitNotFound},
		}},
		{name: "lease grant", ok: []string{"lease", "grant", "30s"}, args: []string{"lease", "grant", "30s"}, extra: []exitCase{
			{class: "invalid (400)", car: "open", args: []string{"lease", "grant", "soon"}, want: ctl.ExitUsage},
		}},
		{name: "lease keepalive", ok: []string{"lease", "keepalive", "--once", leaseID}, args: []string{"lease", "keepalive", "l"}, extra: []exitCase{
			{class: "not found", car: "open", args: []string{"lease", "keepalive", "nolease"}, want: ctl.ExitNotFound},
			{class: "not found (--once)", car: "open", args: []string{"lease", "keepalive", "--once", "nolease"}, want: ctl.ExitNotFound},
		}},
		{name: "lease list", ok: []string{"lease", "list"}, args: []string{"lease", "list"}, extra: []exitCase{
			{class: "invalid (400)", car: "open", args: []string{"lease", "list", "--page-size", "20000"}, want: ctl.ExitUsage},
		}},
		{name: "kv get --prefix", ok: []string{"kv", "get", "--prefix", "th"}, args: []string{"kv", "get", "--prefix", "k"}, extra: []exitCase{
			{class: "usage (KEY and --prefix)", car: "open", args: []string{"kv", "get", "--prefix", "k", "k"}, want: ctl.ExitUsage},
		}},
		{name: "kv put --version", ok: []string{"kv", "put", "--version", "-1", "fresh", "v"}, args: []string{"kv", "put", "--version", "0", "k", "v"}, extra: []exitCase{
			{class: "conflict (409 version-mismatch)", car: "open", args: []string{"kv", "put", "--version", "-1", "there", "v"}, want: ctl.ExitConflict},
			{class: "not found (--lease gone)", car: "open", args: []string{"kv", "put", "--lease", "nolease", "k2", "v"}, want: ctl.ExitNotFound},
		}},
		{name: "queue take --claim", args: []string{"queue", "take", "--claim", "q"}, extra: []exitCase{
			{class: "not found (empty)", car: "open", args: []string{"queue", "take", "--claim", "empty"}, want: ctl.ExitNotFound},
		}},
		{name: "queue ack", args: []string{"queue", "ack", "q", "c"}, extra: []exitCase{
			{class: "not found", car: "open", args: []string{"queue", "ack", "q", "noclaim"}, want: ctl.ExitNotFound},
		}},
		{name: "barrier wait", ok: []string{"barrier", "wait", "down"}, args: []string{"barrier", "wait", "b"}, extra: []exitCase{
			{class: "wait ended (409 barrier-raised)", car: "open", args: []string{"barrier", "wait", "--wait", "100ms", "up"}, want: ctl.ExitNotAcquired},
		}},
		{name: "semaphore", ok: []string{"semaphore", "sfree", "--max", "1", "--", "true"}, args: []string{"semaphore", "s", "--max", "1", "--", "true"}, extra: []exitCase{
			{class: "wait ended (409 semaphore-full)", car: "open", args: []string{"semaphore", "sfull", "--max", "1", "--wait", "100ms", "--", "true"}, want: ctl.ExitNotAcquired, stderr: "alice"},
			{class: "conflict (409 max-mismatch)", car: "open", args: []string{"semaphore", "sfull", "--max", "2", "--wait", "100ms", "--", "true"}, want: ctl.ExitConflict},
		}},
		{name: "rwlock", ok: []string{"rwlock", "rfree", "--read", "--", "true"}, args: []string{"rwlock", "r", "--write", "--", "true"}, extra: []exitCase{
			{class: "wait ended (409 lock-held)", car: "open", args: []string{"rwlock", "rtaken", "--read", "--wait", "100ms", "--", "true"}, want: ctl.ExitNotAcquired, stderr: "alice"},
		}},
		{name: "group join", ok: []string{"group", "join", "gfree", "--id", "m", "--", "true"}, args: []string{"group", "join", "g", "--id", "m", "--", "true"}, extra: []exitCase{
			{class: "conflict (409 member-exists)", car: "open", args: []string{"group", "join", "gtaken", "--id", "dup", "--", "true"}, want: ctl.ExitConflict},
		}},
		{name: "service list", ok: []string{"service", "list", "staken"}, args: []string{"service", "list", "s"}, extra: []exitCase{
			{class: "invalid (400)", car: "open", args: []string{"service", "list", "bad name"}, want: ctl.ExitUsage},
		}},
		{name: "service pick", ok: []string{"service", "pick", "staken"}, args: []string{"service", "pick", "s"}, extra: []exitCase{
			{class: "not found (no instance)", car: "open", args: []string{"service", "pick", "sempty"}, want: ctl.ExitNotFound},
			{class: "invalid (400 strategy)", car: "open", args: []string{"service", "pick", "--strategy", "nearest", "staken"}, want: ctl.ExitUsage},
		}},
		{name: "service register", ok: []string{"service", "register", "sfree", "--id", "i1", "--address", "10.0.0.2", "--", "true"},
			args: []string{"service", "register", "s", "--id", "i1", "--address", "10.0.0.2", "--", "true"}, extra: []exitCase{
				{class: "command's code", car: "open", args: []string{"service", "register", "sfree", "--id", "i2", "--address", "10.0.0.2", "--", "sh", "-c", "exit 3"}, want: 3},
				{class: "conflict (409 instance-exists)", car: "open", args: []string{"service", "register", "staken", "--id", "dup", "--address", "10.0.0.2", "--", "true"}, want: ctl.ExitConflict},
				{class: "usage (no --address)", car: "open", args: []string{"service", "register", "sfree", "--id", "i3", "--", "true"}, want: ctl.ExitUsage},
				{class: "invalid (400 port)", car: "open", args: []string{"service", "register", "sfree", "--id", "i4", "--address", "10.0.0.2", "--port", "70000", "--", "true"}, want: ctl.ExitUsage},
			}},
		{name: "elect --observe", args: []string{"elect", "--observe", "e"}, extra: []exitCase{
			{class: "invalid (400)", car: "open", args: []string{"elect", "--observe", "bad name"}, want: ctl.ExitUsage},
		}},
		{name: "lease revoke", ok: []string{"lease", "revoke", leaseID}, args: []string{"lease", "revoke", "l"}, extra: []exitCase{
			{class: "not found", car: "open", args: []string{"lease", "revoke", "nolease"}, want: ctl.ExitNotFound},
		}},
		{name: "status", ok: []string{"status"}, args: []string{"status"}},
		{name: "lock", ok: []string{"lock", "free", "--", "true"}, args: []string{"lock", "l", "--", "true"}, extra: []exitCase{
			{class: "command's code", car: "open", args: []string{"lock", "free", "--", "sh", "-c", "exit 3"}, want: 3},
			{class: "wait ended (409 lock-held)", car: "open", args: []string{"lock", "taken", "--wait", "100ms", "--", "true"}, want: ctl.ExitNotAcquired, stderr: "held by alice"},
			{class: "invalid (400)", car: "open", args: []string{"lock", "bad name", "--", "true"}, want: ctl.ExitUsage},
		}},
		{name: "elect", ok: []string{"elect", "solo", "--", "true"}, args: []string{"elect", "e", "--", "true"}, extra: []exitCase{
			{class: "command's code", car: "open", args: []string{"elect", "solo2", "--", "sh", "-c", "exit 3"}, want: 3},
			{class: "conflict (409 candidate-exists)", car: "open", args: []string{"elect", "chosen", "--id", "dup", "--", "true"}, want: ctl.ExitConflict},
			{class: "invalid (400)", car: "open", args: []string{"elect", "bad name", "--", "true"}, want: ctl.ExitUsage},
		}},
	}
	for _, v := range verbs {
		cases := []exitCase{
			{class: "usage (unknown flag)", car: "open", args: append(append([]string{}, v.args[:len(strings.Fields(v.name))]...), "--nope", "x"), want: ctl.ExitUsage},
			{class: "unreachable", car: "none", args: v.args, want: ctl.ExitUnavailable},
			{class: "no token (401)", car: "guarded", args: v.args, want: ctl.ExitDenied, stderr: "no token was given: set COORD_TOKEN"},
			{class: "wrong token (401)", car: "guarded", token: "wrong", args: v.args, want: ctl.ExitDenied, stderr: "the token given was refused"},
		}
		if v.ok != nil {
			cases = append([]exitCase{{class: "success", car: "open", stdin: v.okIn, args: v.ok, want: 0}}, cases...)
		}
		cases = append(cases, v.extra...)
		for _, c := range cases {
			t.Run(v.name+"/"+c.class, func(t *testing.T) {
				env := map[string]string{"COORD_ADDR": addr[c.car], "COORD_TOKEN": c.token}
				code, stderr := runVerb(t, env, c.stdin, c.args)
				if code != c.want || !strings.Contains(stderr, c.stderr) {
					t.Fatalf("%q: exit %d, stderr %q; want exit %d%s", c.args, code, stderr, c.want, quoteIf(" and stderr with ", c.stderr))
				}
			})
		}
	}

	// Lost while running (76): the hold's node deleted by another hand.
	raw := sidecartest.ZkClient(t, zkc.Servers(), "")
	for _, c := range []struct{ verb, dir string }{{"lock", root + "/locks/doomed"}, {"elect", root + "/elections/doomed"}} {
		t.Run(c.verb+"/lost (76)", func(t *testing.T) {
			env := map[string]string{"COORD_ADDR": open.M.Addr()}
			done := make(chan int, 1)
			var errb bytes.Buffer
			go func() {
				code, _ := runWrapperTo(t, env, []string{c.verb, "doomed", "--", "sleep", "60"}, &errb)
				done <- code
			}()
			var nodes []string
			testutil.Eventually(t, 20*time.Second, c.verb+" holds", func() bool {
				nodes, _, _ = raw.Children(c.dir)
				return len(nodes) == 1
			})
			if err := raw.Delete(c.dir+"/"+nodes[0], -1); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-done:
				if code != ctl.ExitLeaseLost {
					t.Fatalf("exit %d, want %d", code, ctl.ExitLeaseLost)
				}
			case <-time.After(testutil.Patience(30 * time.Second)):
				t.Fatal("the wrapper did not end")
			}
		})
	}
}

func quoteIf(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + `"` + s + `"`
}

// runVerb runs one verb (or wrapper) in this process.
func runVerb(t *testing.T, env map[string]string, stdin string, args []string) (int, string) {
	t.Helper()
	if _, ok := ctl.Wrappers[args[0]]; ok { // lock, elect, semaphore, rwlock
		var errb bytes.Buffer
		code, _ := runWrapperTo(t, env, args, &errb)
		return code, errb.String()
	}
	r := cli(t, env, stdin, args...)
	return r.code, r.err
}

// runWrapperTo runs `coord-sidecar WRAPPER ARGS...` (ctl.Wrappers) in this process, its
// stderr to errb.
func runWrapperTo(t *testing.T, env map[string]string, args []string, errb *bytes.Buffer) (int, string) {
	var out bytes.Buffer
	getenv := func(k string) string { return env[k] }
	code := ctl.Wrappers[args[0]](sidecartest.QuietSignals(t), args[1:], getenv, &out, errb)
	return code, out.String()
}

// freeAddr is a loopback address where nothing listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
