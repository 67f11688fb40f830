package sidecar_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// A second sidecar on a port in use says "address already in use" and exits
// non-zero without opening a ZooKeeper session: it binds before it connects
// (the ZooKeeper server, behind a counting proxy, is never dialled).
func TestPortInUseOpensNoSession(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cmd := exec.Command(sidecartest.BuildBinary(t), "--listen", taken.Addr().String(), "--zk", proxy.Addr(), "--zk-root", zktest.Root(t))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the sidecar on a port in use exited 0:\n%s", out)
	}
	if !strings.Contains(string(out), "address already in use") {
		t.Fatalf("the sidecar on a port in use did not say so:\n%s", out)
	}
	if n := proxy.Accepted(); n != 0 {
		t.Fatalf("the sidecar on a port in use dialled ZooKeeper %d times before it gave up", n)
	}
}
