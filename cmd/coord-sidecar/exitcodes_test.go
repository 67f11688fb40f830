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

// Every verb of the client and both wrappers, for every outcome class that
// applies to it, against real sidecars: the exit code is the one table's.
func TestExitCodesVerbByVerb(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	open := sidecartest.Start(t, zkc.Servers(), root, "--max-body", "1024", "--max-item", "1024")
	guarded := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--token", "s3cret")
	none := freeAddr(t)
	addr := map[string]string{"open": open.M.Addr(), "guarded": guarded.M.Addr(), "none": none}

	// What the cases find: a key, an item, a lease, a counter at the top, a
	// held lock, an elected candidate.
	cli(t, map[string]string{"COORD_ADDR": open.M.Addr()}, "", "kv", "put", "there", "v").want(t, 0, "")
	cli(t, map[string]string{"COORD_ADDR": open.M.Addr()}, "", "counter", "add", "top", "9223372036854775807").want(t, 0, "*")
	open.Must(t, 201, "POST", "/v1/locks/taken?owner=alice")
	open.Must(t, 201, "POST", "/v1/elections/chosen/candidates?id=dup")
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
		{name: "lease keepalive", ok: []string{"lease", "keepalive", leaseID}, args: []string{"lease", "keepalive", "l"}, extra: []exitCase{
			{class: "not found", car: "open", args: []string{"lease", "keepalive", "nolease"}, want: ctl.ExitNotFound},
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
	switch args[0] {
	case "lock", "elect":
		var errb bytes.Buffer
		code, _ := runWrapperTo(t, env, args, &errb)
		return code, errb.String()
	}
	r := cli(t, env, stdin, args...)
	return r.code, r.err
}

// runWrapperTo runs `coord-sidecar lock|elect ARGS...` in this process, its
// stderr to errb.
func runWrapperTo(t *testing.T, env map[string]string, args []string, errb *bytes.Buffer) (int, string) {
	var out bytes.Buffer
	getenv := func(k string) string { return env[k] }
	run := ctl.RunLock
	if args[0] == "elect" {
		run = ctl.RunElect
	}
	code := run(sidecartest.QuietSignals(t), args[1:], getenv, &out, errb)
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
