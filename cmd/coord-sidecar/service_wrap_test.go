package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// serviceRun is one `coord-sidecar service register` run in the test's
// process, its command a shell that writes its COORD_LEASE to started and
// exits 3 once stop exists.
type serviceRun struct {
	dir  string
	send chan<- os.Signal
	wrapRun
}

func startServiceRegister(t *testing.T, addr string, flags ...string) *serviceRun {
	t.Helper()
	dir := t.TempDir()
	sig, send := sidecartest.NewSignals(t)
	r := &serviceRun{dir: dir, send: send, wrapRun: wrapRun{code: make(chan int, 1), stderr: &bytes.Buffer{}}}
	script := `printf %s "$COORD_LEASE" > "$0/started.tmp" && mv "$0/started.tmp" "$0/started"; while [ ! -e "$0/stop" ]; do sleep 0.05; done; exit 3`
	args := append(append([]string{"web"}, flags...), "--", "sh", "-c", script, dir)
	getenv := func(k string) string {
		if k == "COORD_ADDR" {
			return addr
		}
		return ""
	}
	go func() {
		var out bytes.Buffer
		r.code <- ctl.RunServiceRegister(sig, args, getenv, &out, r.stderr)
	}()
	return r
}

// lease waits for the command to start and returns its COORD_LEASE.
func (r *serviceRun) lease(t *testing.T) string {
	t.Helper()
	var lease []byte
	testutil.Eventually(t, 10*time.Second, "the command starts", func() bool {
		b, err := os.ReadFile(filepath.Join(r.dir, "started"))
		lease = b
		return err == nil
	})
	return string(lease)
}

// service register: the instance is listed, on the command's COORD_LEASE,
// exactly while the command runs; the wrapper exits with the command's code
// and unregisters, stops the command and exits 76 when its lease is revoked,
// passes SIGTERM on and exits 143; an id another lease holds is 65 (a conflict) with the
// command never started; a flag missing or an instance the sidecar refuses
// is 64.
func TestServiceRegisterWrapper(t *testing.T) {
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	addr := car.M.Addr()
	instances := func() string {
		var ids []string
		list, _ := car.Must(t, http.StatusOK, http.MethodGet, "/v1/services/web").Body["instances"].([]any)
		for _, in := range list {
			m, _ := in.(map[string]any)
			ids = append(ids, sidecartest.Str(m["id"]))
		}
		return strings.Join(ids, " ")
	}

	r := startServiceRegister(t, addr, "--id", "w1", "--address", "10.0.0.1", "--port", "80", "--payload", `{"zone":"a"}`)
	lease := r.lease(t)
	got := car.Must(t, http.StatusOK, http.MethodGet, "/v1/services/web")
	if instances() != "w1" || !strings.Contains(string(got.Raw), `"address":"10.0.0.1"`) || !strings.Contains(string(got.Raw), `"payload":{"zone":"a"}`) {
		t.Fatalf("while the command runs: %s", got.Raw)
	}
	if l := car.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease); !strings.Contains(string(l.Raw), "w1") {
		t.Fatalf("COORD_LEASE %q does not hold the instance: %s", lease, l.Raw)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "stop"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := r.exit(t); code != 3 {
		t.Fatalf("exit %d, want the command's 3; stderr %q", code, r.stderr)
	}
	if s := instances(); s != "" {
		t.Fatalf("after the command exited: instances %q", s)
	}

	r = startServiceRegister(t, addr, "--id", "w2", "--address", "10.0.0.2")
	lease = r.lease(t)
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/leases/"+lease)
	if code := r.exit(t); code != ctl.ExitLeaseLost || !strings.Contains(r.stderr.String(), "it was stopped") {
		t.Fatalf("lease revoked: exit %d, stderr %q", code, r.stderr)
	}

	r = startServiceRegister(t, addr, "--id", "w3", "--address", "10.0.0.3")
	r.lease(t)
	r.send <- syscall.SIGTERM
	if code := r.exit(t); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("SIGTERM: exit %d, stderr %q", code, r.stderr)
	}
	if s := instances(); s != "" {
		t.Fatalf("after SIGTERM: instances %q", s)
	}

	car.Send(t, http.StatusCreated, http.MethodPut, "/v1/services/web/instances/taken?ttl=60s", `{"address":"h"}`)
	r = startServiceRegister(t, addr, "--id", "taken", "--address", "10.0.0.4")
	if code := r.exit(t); code != ctl.ExitConflict || !strings.Contains(r.stderr.String(), "instance exists") {
		t.Fatalf("an id another lease holds: exit %d, stderr %q", code, r.stderr)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "started")); err == nil {
		t.Fatal("the command ran though the instance was not registered")
	}

	for _, flags := range [][]string{{"--address", "h"}, {"--id", "x"}, {"--id", "x", "--address", "h", "--payload", "{"}, {"--id", "x", "--address", "h", "--port", "70000"}} {
		r := startServiceRegister(t, addr, flags...)
		if code := r.exit(t); code != ctl.ExitUsage {
			t.Fatalf("%q: exit %d, stderr %q; want 64", flags, code, r.stderr)
		}
	}
}
