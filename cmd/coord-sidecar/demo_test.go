//go:build unix

package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// runDemo runs scripts/demo.sh (`make demo`) with the binary under test and the
// given COORD_ZK ("" for none), and returns what it printed.
func runDemo(t *testing.T, coordZK string) string {
	t.Helper()
	for tool, pkg := range map[string]string{"bash": "bash", "curl": "curl", "jq": "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if testing.Short() {
				t.Skipf("the demo needs %s (-short: skipped)", tool)
			}
			t.Fatalf("the demo needs %s on PATH: install it (Debian/Ubuntu: apt-get install %s)", tool, pkg)
		}
	}
	bin := sidecartest.BuildBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join("..", "..", "scripts", "demo.sh"))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "COORD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "BIN="+bin)
	if coordZK != "" {
		cmd.Env = append(cmd.Env, "COORD_ZK="+coordZK)
	}
	// On a timeout, SIGTERM: the script's trap stops what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("demo.sh: %v; it printed:\n%s", err, out)
	}
	// The scenario ran to its end: m3, on sidecar A, sidecartest.Leads once B is killed.
	if !regexp.MustCompile(`(?m)^== sidecar B killed ==  limit 500, version [0-9]+, leader m3$`).Match(out) {
		t.Fatalf("demo.sh did not end as docs/EXAMPLES.md shows; it printed:\n%s", out)
	}
	return string(out)
}

// With COORD_ZK, `make demo` uses that ZooKeeper (its --zk-root appears there)
// and starts none of its own; its sidecars listen on free ports.
func TestDemoUsesCOORDZK(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	zkc := zktest.Shared(t)
	servers := strings.Join(zkc.Servers(), ",")
	out := runDemo(t, servers)
	if !strings.Contains(out, "ZooKeeper: "+servers+" (COORD_ZK)\n") {
		t.Fatalf("the demo does not say it uses COORD_ZK=%s:\n%s", servers, out)
	}
	if strings.Contains(out, "zookeeper.sh") {
		t.Fatalf("the demo touched a ZooKeeper of its own though COORD_ZK is set:\n%s", out)
	}
	m := regexp.MustCompile(`under --zk-root (/coord-demo/run-[0-9-]+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no --zk-root in:\n%s", out)
	}
	conn := zktest.Connect(t, zkc.Servers(), 5*time.Second)
	if ok, _, err := conn.Exists(m[1]); err != nil || !ok {
		t.Fatalf("the demo's --zk-root %s is not in COORD_ZK's ZooKeeper (%v)", m[1], err)
	}
	for _, port := range regexp.MustCompile(`sidecar [AB]: http://127\.0\.0\.1:([0-9]+) `).FindAllStringSubmatch(out, -1) {
		if port[1] == "8080" {
			t.Fatalf("a demo sidecar on 8080:\n%s", out)
		}
	}
}

// Without COORD_ZK, `make demo` starts a ZooKeeper of its own on a free port (not
// 2181) and stops it on the way out.
func TestDemoStartsItsOwnZooKeeper(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if testing.Short() {
		t.Skip("starts a ZooKeeper server of its own")
	}
	out := runDemo(t, "")
	m := regexp.MustCompile(`(?m)^zookeeper\.sh: serving on (127\.0\.0\.1:([0-9]+)) `).FindStringSubmatch(out)
	if m == nil || m[2] == "2181" {
		t.Fatalf("want a ZooKeeper of the demo's own on a free port:\n%s", out)
	}
	if !strings.Contains(out, "zookeeper.sh: stopped pid") {
		t.Fatalf("the demo did not stop its ZooKeeper:\n%s", out)
	}
	if c, err := net.DialTimeout("tcp", m[1], time.Second); err == nil {
		c.Close()
		t.Fatalf("something still listens on %s after the demo", m[1])
	}
}

// `make install PREFIX=DIR` puts a working binary at DIR/bin/coord-sidecar, as
// the README says.
func TestMakeInstall(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make on PATH")
	}
	prefix := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "-C", "../..", "install", "PREFIX="+prefix)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make install PREFIX=%s: %v\n%s", prefix, err, out)
	}
	bin := filepath.Join(prefix, "bin", "coord-sidecar")
	if st, err := os.Stat(bin); err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("%s after make install: %v %v", bin, st, err)
	}
	out, _ := exec.CommandContext(ctx, bin, "--help").CombinedOutput()
	if !strings.Contains(string(out), "coord-sidecar lock NAME") {
		t.Fatalf("%s --help printed:\n%s", bin, out)
	}
}
