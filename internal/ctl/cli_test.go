package ctl

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// cliResult is one run of the command-line client.
type cliResult struct {
	code        int
	stdout, err string
}

// cli runs `coord-sidecar ARGS...` in this process with env as its environment
// and stdin as its input; no signal comes.
func cli(t *testing.T, env map[string]string, stdin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var out, errb bytes.Buffer
	code := RunCLI(&Signals{ctx: ctx, cancel: cancel}, args, func(k string) string { return env[k] }, strings.NewReader(stdin), &out, &errb)
	return cliResult{code, out.String(), errb.String()}
}

// want fails t unless r exited code with stdout out.
func (r cliResult) want(t *testing.T, code int, out string) {
	t.Helper()
	if r.code != code || r.stdout != out {
		t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout %q", r.code, r.stdout, r.err, code, out)
	}
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

// Usage errors exit 64 with the reason; --help goes to stdout and exits 0; a
// sidecar that does not listen is 69.
func TestCLIUsageAndUnavailable(t *testing.T) {
	none := map[string]string{"COORD_ADDR": freeAddr(t)}
	for _, args := range [][]string{
		{"kv"}, {"kv", "frob", "k"}, {"kv", "get"}, {"kv", "get", "a", "b"}, {"counter", "add", "n", "1", "2"},
		{"kv", "get", "--nope", "k"}, {"status", "extra"},
	} {
		r := cli(t, none, "", args...)
		if r.code != ExitUsage || r.stdout != "" || !strings.Contains(r.err, "usage:") {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q; want 64 and the usage on stderr", args, r.code, r.stdout, r.err)
		}
	}
	r := cli(t, none, "", "kv", "get", "--addr", "ftp://x", "k")
	r.want(t, ExitUsage, "")
	for _, args := range [][]string{{"kv", "get", "--help"}, {"kv", "--help"}, {"lease", "grant", "-h"}} {
		r := cli(t, none, "", args...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage:") || r.err != "" {
			t.Fatalf("%q: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.err)
		}
	}
	for _, args := range [][]string{{"kv", "get", "k"}, {"status"}, {"queue", "put", "q", "x"}} {
		r := cli(t, none, "", args...)
		if r.code != ExitUnavailable || r.err == "" {
			t.Fatalf("%q with no sidecar: exit %d, stderr %q; want 69", args, r.code, r.err)
		}
	}
}
