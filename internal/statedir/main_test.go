package statedir

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"testing"
)

// childEnv makes the test binary, run again by a test, act as another process
// on a state directory instead of running the tests (as os/exec's tests do):
// "hold:<dir>" opens dir, "adopt:<dir>" adopts it through descriptor 3. Either
// writes its pid, prints "owned", and keeps the directory until its stdin ends
// or it is killed.
const childEnv = "STATEDIR_TEST_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(child(role))
	}
	code := m.Run()
	if code == 0 && leaked() {
		code = 1
	}
	os.Exit(code)
}

func child(role string) int {
	kind, dir, _ := strings.Cut(role, ":")
	var d *Dir
	var err error
	switch kind {
	case "hold":
		d, err = Open(dir)
	case "adopt":
		d, err = Adopt(dir, os.NewFile(3, "lock"))
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err == nil {
		err = d.WritePID(os.Getpid())
	}
	if err != nil {
		fmt.Println("error:", err)
		return 2
	}
	fmt.Println("owned")
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	_ = d.Close()
	return 0
}

// leaked reports (and prints) a Journal goroutine still running after the tests.
func leaked() bool {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	if strings.Contains(b.String(), "statedir.(*Journal).run") {
		fmt.Fprintln(os.Stderr, "a Journal's goroutine outlived the tests:\n"+b.String())
		return true
	}
	return false
}
