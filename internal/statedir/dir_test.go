package statedir

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

func openTemp(t testing.TB) *Dir {
	t.Helper()
	d, err := Open(filepath.Join(t.TempDir(), "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// wantInUse fails t unless err is an *InUseError naming pid.
func wantInUse(t *testing.T, err error, pid int) {
	t.Helper()
	var inUse *InUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrInUse) {
		t.Fatalf("got %v, want the directory in use", err)
	}
	if inUse.PID != pid || !strings.Contains(err.Error(), strconv.Itoa(pid)) {
		t.Fatalf("got %q (pid %d), want the holder's pid %d named", err, inUse.PID, pid)
	}
}

func TestASecondOpenInTheSameProcessIsRefusedNamingTheHolder(t *testing.T) {
	d := openTemp(t)
	if _, err := Open(d.Path()); !errors.Is(err, ErrInUse) {
		t.Fatalf("second Open before any pid file: %v, want in use", err)
	}
	if err := d.WritePID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	_, err := Open(d.Path())
	wantInUse(t, err, os.Getpid())

	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), PIDFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file after Close: %v, want removed", err)
	}
	again, err := Open(d.Path())
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	_ = again.Close()
}

func TestOpenWaitTakesTheDirectoryOnceItsHolderCloses(t *testing.T) {
	d := openTemp(t)
	if err := d.WritePID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := OpenWait(short, d.Path())
	wantInUse(t, err, os.Getpid())
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("OpenWait past its deadline: %v, want the deadline named", err)
	}

	got := make(chan error, 1)
	go func() {
		w, err := OpenWait(context.Background(), d.Path())
		if err == nil {
			err = w.Close()
		}
		got <- err
	}()
	_ = d.Close()
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(testutil.Patience(5 * time.Second)):
		t.Fatal("OpenWait did not take the freed directory")
	}
}

// startChild runs the test binary as another process on dir in role (see
// childEnv), with extra passed as descriptor 3 on, and waits until it owns dir.
func startChild(t *testing.T, role, dir string, extra ...*os.File) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role+":"+dir)
	cmd.ExtraFiles = extra
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(stdout).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if strings.TrimSpace(s) != "owned" {
			t.Fatalf("child %s: %q", role, s)
		}
	case <-time.After(testutil.Patience(10 * time.Second)):
		t.Fatalf("child %s did not take the directory", role)
	}
	return cmd
}

// kill9 kills cmd with SIGKILL and reaps it.
func kill9(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func TestAnotherProcessHoldsTheDirectoryUntilItIsKilled(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	holder := startChild(t, "hold", dir)

	_, err := Open(dir)
	wantInUse(t, err, holder.Process.Pid)

	kill9(t, holder)
	d, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after the holder was killed: %v", err)
	}
	_ = d.Close()
}

func TestASuccessorProcessAdoptsTheLockAndKeepsItAfterItsPredecessorEnds(t *testing.T) {
	d := openTemp(t)
	if err := d.WritePID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	f, err := d.File()
	if err != nil {
		t.Fatal(err)
	}
	successor := startChild(t, "adopt", d.Path(), f)
	_ = f.Close()

	// The predecessor ends; the successor keeps the directory and its pid file.
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if pid, err := ReadPID(d.Path()); err != nil || pid != successor.Process.Pid {
		t.Fatalf("pid file after the predecessor closed: %d, %v; want %d", pid, err, successor.Process.Pid)
	}
	_, err = Open(d.Path())
	wantInUse(t, err, successor.Process.Pid)

	kill9(t, successor)
	again, err := Open(d.Path())
	if err != nil {
		t.Fatalf("Open after the successor was killed: %v", err)
	}
	_ = again.Close()
}

func TestAdoptInTheSameProcessHandsTheLockOver(t *testing.T) {
	d := openTemp(t)
	f, err := d.File()
	if err != nil {
		t.Fatal(err)
	}
	// A write of the predecessor's in progress: the adopter leaves it alone.
	writing := filepath.Join(d.Path(), StateFile+tmpMark+"42")
	if err := os.WriteFile(writing, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	next, err := Adopt(d.Path(), f)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(writing); err != nil {
		t.Errorf("the predecessor's temporary file after Adopt: %v, want left alone", err)
	}
	_ = d.Close()
	if _, err := Open(d.Path()); !errors.Is(err, ErrInUse) {
		t.Fatalf("Open while the adopter holds it: %v, want in use", err)
	}
	_ = next.Close()
	again, err := Open(d.Path())
	if err != nil {
		t.Fatalf("Open after the adopter closed: %v", err)
	}
	_ = again.Close()
}

func TestAdoptRefusesAFileThatIsNotTheLockFile(t *testing.T) {
	d := openTemp(t)
	other, err := os.CreateTemp(t.TempDir(), "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Adopt(d.Path(), other); err == nil || errors.Is(err, ErrInUse) {
		t.Fatalf("Adopt of another file: %v, want refused", err)
	}
	// Not a way around the lock: a fresh descriptor of the lock file, with its
	// own open file description, is refused as in use.
	lock, err := os.Open(filepath.Join(d.Path(), LockFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Adopt(d.Path(), lock); !errors.Is(err, ErrInUse) {
		t.Fatalf("Adopt of a fresh descriptor: %v, want in use", err)
	}
}

func mode(t *testing.T, path string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestTheDirectoryIs0700AndItsFiles0600(t *testing.T) {
	old := syscall.Umask(0) // the modes must not depend on the umask
	defer syscall.Umask(old)
	d := openTemp(t)
	if err := d.WritePID(os.Getpid()); err != nil {
		t.Fatal(err)
	}
	if err := d.Save(State{ZK: "z:2181", Root: "/coord"}); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, d.Path()); m != 0o700 {
		t.Errorf("directory mode %04o, want 0700", m)
	}
	for _, name := range []string{LockFile, PIDFile, StateFile} {
		if m := mode(t, filepath.Join(d.Path(), name)); m != 0o600 {
			t.Errorf("%s mode %04o, want 0600", name, m)
		}
	}
}

func TestAnOpenDirectoryIsTightenedTo0700(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil { // a Kubernetes emptyDir's mode
		t.Fatal(err)
	}
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("mode after Open %04o, want 0700", m)
	}
}

func TestAClosedDirWritesNothing(t *testing.T) {
	d := openTemp(t)
	_ = d.Close()
	if err := d.Save(State{}); err == nil {
		t.Error("Save after Close succeeded")
	}
	if err := d.WritePID(1); err == nil {
		t.Error("WritePID after Close succeeded")
	}
	if _, err := d.File(); err == nil {
		t.Error("File after Close succeeded")
	}
}

func TestADirectoryOfAnotherUserIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if d, err := Open(dir); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		if d != nil {
			_ = d.Close()
		}
		t.Fatalf("Open of another user's directory: %v, want refused", err)
	}
}

func TestAPidFileLeftByAKilledOwnerIsNotNamed(t *testing.T) {
	d := openTemp(t)
	gone := exec.Command(os.Args[0], "-test.run=^$")
	gone.Env = append(os.Environ(), childEnv+"=none:")
	_ = gone.Run() // a process that has ended, as a killed owner has
	stale := filepath.Join(d.Path(), PIDFile)
	if err := os.WriteFile(stale, []byte(strconv.Itoa(gone.Process.Pid)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(d.Path())
	var inUse *InUseError
	if !errors.As(err, &inUse) || inUse.PID != 0 {
		t.Fatalf("got %v, want in use by an owner not named", err)
	}
}
