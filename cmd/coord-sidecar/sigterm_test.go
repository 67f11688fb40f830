package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// SIGTERM: the process stops taking requests, ends its streams and long-polls,
// releases what it holds, closes its session and exits 0.
func TestSIGTERMReleasesAndExitsZero(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	addr := sidecartest.FreeAddr(t)
	cmd := exec.Command(sidecartest.BuildBinary(t), "--listen", addr, "--zk", zkc.Server(0), "--zk-root", root)
	cmd.Env = append(os.Environ(), "COORD_SESSION_TIMEOUT=5s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	car := &sidecartest.Sidecar{Base: "http://" + addr}
	car.WaitReady(t)
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	lease := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/term?lease="+lease)
	st := car.OpenStream(t, "/v1/leases/"+lease+"/events")
	st.Next(t, 5*time.Second)
	waiter := make(chan *sidecartest.Response, 1)
	go func() {
		r, _ := car.Do(context.Background(), http.MethodPost, "/v1/locks/term?wait=60s", nil)
		waiter <- r
	}()
	testutil.Eventually(t, 10*time.Second, "the waiter waits", func() bool { return len(sidecartest.LockNodes(t, conn, root, "term")) == 2 })

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if ev := st.Next(t, 10*time.Second); ev.Name != "revoked" {
		t.Fatalf("lease stream at shutdown: %+v, want revoked", ev)
	}
	select {
	case r := <-waiter:
		if r == nil || r.Status != http.StatusServiceUnavailable {
			t.Fatalf("long-poll at shutdown: %+v, want 503", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long-poll did not end at shutdown")
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit: %v, want status 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the process did not exit after SIGTERM")
	}
	if n := sidecartest.LockNodes(t, conn, root, "term"); len(n) != 0 {
		t.Fatalf("nodes left after shutdown: %v", n)
	}
}

// Close may be called again (a signal handler and a deferred Close both call
// it): later calls return at once with the first call's result.
func TestCloseTwice(t *testing.T) {
	sc := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t))
	first := sc.M.Close()
	done := make(chan error, 1)
	go func() { done <- sc.M.Close() }()
	select {
	case err := <-done:
		if err != first {
			t.Fatalf("second Close: %v, first: %v", err, first)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("second Close blocked")
	}
}
