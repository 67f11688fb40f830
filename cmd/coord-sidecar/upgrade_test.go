package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// An upgrade as a supervisor sees it (systemd's PIDFile=, deploy/systemd):
// throughout, the pid file names a process (never missing), and when the old
// process exits (0), it names the successor, alive. systemd reads the file at
// that moment to find the new main process; missing or naming the old one,
// the service would count as ended and its successor be stopped.
func TestUpgradePIDFileNamesTheSuccessorWhenTheOldExits(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	r := newRestartable(t, zkc.Servers(), zktest.Root(t), "4s")
	a := r.start(t)
	old := r.cmd.Process.Pid
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=30s")

	var mu sync.Mutex
	var gaps []string
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the pid file, read as often as possible during the hand-over
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := statedir.ReadPID(r.state); err != nil {
				mu.Lock()
				gaps = append(gaps, err.Error())
				mu.Unlock()
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	r.upgradeAndAwaitExit(t)
	pid, err := statedir.ReadPID(r.state) // what systemd reads on the old's exit
	close(stop)
	<-sampled
	if err == nil && pid != old {
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	}
	if code := r.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("the old process exited %d, want 0; its log:\n%s", code, r.logs(t))
	}
	if err != nil || pid == old || syscall.Kill(pid, 0) != nil {
		t.Fatalf("when the old process (%d) exited, the pid file named %d (%v); want its successor, alive", old, pid, err)
	}
	if len(gaps) > 0 {
		t.Fatalf("the pid file was missing or unreadable %d times during the hand-over: %s", len(gaps), gaps[0])
	}
	a.WaitReady(t)
}

// A successor that takes the socket and then ends before it owns the state
// directory leaves nobody serving: the old process, having handed everything
// over, exits 1 (so that systemd's Restart=on-failure starts the sidecar
// again), and a process started again on the directory resumes the lease.
func TestUpgradeWhoseSuccessorDiesExitsWithAFailure(t *testing.T) {
	t.Parallel() // mostly waiting on processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	zkc := zktest.Shared(t)
	r := newRestartable(t, zkc.Servers(), zktest.Root(t), "10s")
	r.bin = filepath.Join(t.TempDir(), "coord-sidecar")
	copyFile(t, sidecartest.BuildBinary(t), r.bin)
	a := r.start(t)
	lease := sidecartest.Str(a.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	testutil.Eventually(t, 10*time.Second, "the lease saved", func() bool {
		return strings.Contains(r.savedState(t), lease)
	})

	// The "new binary": it says it took the socket (descriptor 4), then dies.
	if err := os.Remove(r.bin); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.bin, []byte("#!/bin/sh\nprintf x >&4\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.upgradeAndAwaitExit(t)
	if code := r.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("the old process exited %d, want 1 (nobody serves); its log:\n%s", code, r.logs(t))
	}

	copyFile(t, sidecartest.BuildBinary(t), r.bin) // the supervisor's restart
	a = r.start(t)
	a.Must(t, http.StatusOK, http.MethodGet, "/v1/leases/"+lease)
}

func copyFile(t testing.TB, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(to)
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
