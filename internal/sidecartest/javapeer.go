package sidecartest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// JavaPeer is a Java program of Debian's packages' libraries (a Curator
// recipe, say) in a JVM of its own, run from one source file and driven a
// line at a time: each command written to its stdin is answered by one line
// on its stdout, "error …" when it failed. It prints "ready" once started,
// and exits at the end of its input.
type JavaPeer struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

// StartJavaPeer runs source (a .java file, with Java's single-file launcher)
// with args, its class path the jars of /usr/share/java named (what
// scripts/deps.sh installs; pkg names the Debian package for the message; a
// name ending in "?" is left out when missing),
// and waits for its "ready". A missing jar fails the test, or skips it when
// COORD_SKIP_CURATOR is set. The peer is stopped when the test ends, and its
// stderr shown if the test failed.
func StartJavaPeer(t *testing.T, pkg string, jars []string, source string, args ...string) *JavaPeer {
	t.Helper()
	var cp []string
	for _, j := range jars {
		j, optional := strings.CutSuffix(j, "?")
		p := filepath.Join("/usr/share/java", j)
		if _, err := os.Stat(p); err != nil {
			if optional {
				continue
			}
			if os.Getenv("COORD_SKIP_CURATOR") != "" {
				t.Skipf("no %s (Debian's %s): %v", p, pkg, err)
			}
			t.Fatalf("no %s: install Debian's %s (scripts/deps.sh test), or set COORD_SKIP_CURATOR: %v", p, pkg, err)
		}
		cp = append(cp, p)
	}
	cmd := exec.Command("java", append([]string{"-Xmx128m", "-XX:+UseSerialGC", "-cp", strings.Join(cp, ":"), source}, args...)...)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = in.Close()
		select {
		case <-exited:
		case <-time.After(testutil.Patience(20 * time.Second)):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s's stderr:\n%s", source, stderr.String())
		}
	})
	p := &JavaPeer{t: t, in: in, out: bufio.NewScanner(out)}
	p.out.Buffer(make([]byte, 1<<20), 1<<20)
	// Compiling the source and starting the JVM takes seconds on a busy machine.
	if got := p.Line(testutil.Patience(120 * time.Second)); got != "ready" {
		t.Fatalf("%s did not start: %q\n%s", source, got, stderr.String())
	}
	return p
}

// Line reads the peer's next line ("EOF" at the end of its output); the test
// fails when none comes within within.
func (p *JavaPeer) Line(within time.Duration) string {
	p.t.Helper()
	got := make(chan string, 1)
	go func() {
		if p.out.Scan() {
			got <- p.out.Text()
		} else {
			got <- "EOF"
		}
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(within):
		p.t.Fatal("the Java peer did not answer")
		return ""
	}
}

// Send writes one command without waiting for its answer (read it with Line).
func (p *JavaPeer) Send(format string, args ...any) {
	p.t.Helper()
	if _, err := fmt.Fprintf(p.in, format+"\n", args...); err != nil {
		p.t.Fatal(err)
	}
}

// Do sends one command and returns its answer; an "error …" answer, or none,
// fails the test.
func (p *JavaPeer) Do(format string, args ...any) string {
	p.t.Helper()
	p.Send(format, args...)
	got := p.Line(testutil.Patience(30 * time.Second))
	if strings.HasPrefix(got, "error") || got == "EOF" {
		p.t.Fatalf("Java peer: %s", got)
	}
	return got
}
