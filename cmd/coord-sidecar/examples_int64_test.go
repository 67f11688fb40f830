package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The Node client keeps signed 64-bit values exact (examples/node/json.mjs):
// counter.mjs sets a counter past 2^53 and reads it back digit for digit, an
// add answers the exact sum, an expect= past 2^53 matches (a rounded one would
// be refused), a refusal's problem document carries the exact value, and the
// delete removes the counter (a second one is 404 counter-not-found).
func TestExampleNodeCounterExact(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	node := exampleLangs[2]
	if node.name != "node" {
		t.Fatalf("exampleLangs[2] is %s, want node", node.name)
	}
	node.need(t)
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	run := func(code int, args ...string) *exampleRun {
		t.Helper()
		r := startExample(t, car, 30*time.Second, nil, node.argv("node/counter.mjs", append([]string{"signups"}, args...)...)...)
		if code != 0 {
			r.exit(t, code, 30*time.Second)
		}
		return r
	}
	prints := func(want string, args ...string) {
		t.Helper()
		r := run(0, args...)
		r.expect(t, want, 30*time.Second)
		r.exit(t, 0, 30*time.Second)
	}

	prints("9223372036854775804", "set", "9223372036854775804")
	if r := car.Must(t, http.StatusOK, http.MethodGet, "/v1/counters/signups"); !strings.Contains(string(r.Raw), `"value":9223372036854775804}`) {
		t.Fatalf("the sidecar holds %s", r.Raw)
	}
	prints("9223372036854775803", "add", "-1")
	prints("9223372036854775803")
	r := run(1, "add", "10")
	if e := r.stderr.String(); !strings.Contains(e, "/counter-overflow") || !strings.Contains(e, `"value":9223372036854775803`) {
		t.Fatalf("overflow: stderr %q", e)
	}
	prints("5", "set", "5", "9223372036854775803")
	prints("-9223372036854775807", "set", "-9223372036854775807")
	prints("-9223372036854775807")
	prints("deleted", "delete")
	prints("0")
	r = run(1, "delete")
	if e := r.stderr.String(); !strings.Contains(e, "404") || !strings.Contains(e, "/counter-not-found") {
		t.Fatalf("second delete: stderr %q", e)
	}
}
