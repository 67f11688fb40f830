package sidecartest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// built is the real command (cmd/coord-sidecar), built once per test binary run (the first
// caller builds it, later ones wait and share it: about 20 tests run it, and a
// build each cost the suite minutes of CPU); TestMain removes it.
var built struct {
	mu       sync.Mutex
	dir, bin string
	err      error
}

// BuildBinary returns the path of the real command, built once per test
// binary run. Tests only run it, never change it.
func BuildBinary(t testing.TB) string {
	t.Helper()
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.bin == "" && built.err == nil {
		built.dir, built.err = os.MkdirTemp("", "coord-sidecar-bin-")
		if built.err == nil {
			bin := filepath.Join(built.dir, "coord-sidecar")
			if out, err := exec.Command("go", "build", "-o", bin, "github.com/coord-sidecar/coord-sidecar/cmd/coord-sidecar").CombinedOutput(); err != nil {
				built.err = fmt.Errorf("go build: %v\n%s", err, out)
			} else {
				built.bin = bin
			}
		}
	}
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// RemoveBuiltBinary removes what BuildBinary built (TestMain, at the end).
func RemoveBuiltBinary() {
	built.mu.Lock()
	defer built.mu.Unlock()
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}

// FreeAddr is a free loopback address (host:port) to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// StartKillable runs the built binary as a process of its own (session timeout
// 1s) on server with root, so that a test can SIGKILL it; it is killed at the
// test's end.
func StartKillable(t *testing.T, server, root string) (*Sidecar, *exec.Cmd) {
	t.Helper()
	addr := FreeAddr(t)
	cmd := exec.Command(BuildBinary(t), "--listen", addr, "--zk", server, "--zk-root", root, "--session-timeout", "1s")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	p := &Sidecar{Base: "http://" + addr}
	p.WaitReady(t)
	return p, cmd
}
