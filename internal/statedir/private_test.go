package statedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A state file copied in open to others (cp under a umask of 022, or 0644 on
// purpose) is 0600 once read; so is a bad one moved aside, whatever mode it
// came with.
func TestAStateFileReadOrMovedAsideIs0600(t *testing.T) {
	old := syscall.Umask(0) // the modes must not depend on the umask
	defer syscall.Umask(old)
	d := openTemp(t)
	path := filepath.Join(d.Path(), StateFile)
	s := sample()
	if err := os.WriteFile(path, encoded(t, func(map[string]any) {}), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(s.ZK, s.Root); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, path); m != 0o600 {
		t.Errorf("a state file read: mode %04o, want 0600", m)
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("not a state"), 0o666); err != nil {
		t.Fatal(err)
	}
	_, err := d.Load(s.ZK, s.Root)
	var bad *BadStateError
	if !errors.As(err, &bad) || bad.MoveErr != nil {
		t.Fatalf("Load of a bad file: %v, want it moved aside", err)
	}
	if m := mode(t, bad.MovedTo); m != 0o600 {
		t.Errorf("the bad file moved aside to %s: mode %04o, want 0600", bad.MovedTo, m)
	}
}

// A symbolic link in place of the lock file, the pid file or the state file
// is refused with an error that says so, and never followed: the file it
// names is neither created, read nor changed.
func TestSymbolicLinksInTheDirectoryAreRefused(t *testing.T) {
	for _, name := range []string{LockFile, PIDFile, StateFile} {
		t.Run(name, func(t *testing.T) {
			base := t.TempDir()
			dir := filepath.Join(base, "state")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(base, "elsewhere")
			if err := os.WriteFile(target, []byte("someone else's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			d, err := Open(dir)
			if err == nil {
				_ = d.Close()
			}
			if !errors.Is(err, ErrSymlink) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("Open with %s a link: %v, want ErrSymlink naming it", name, err)
			}
			wantUntouched(t, target)
		})
	}
}

// A link made after Open (in place of the state file or the pid file) is
// refused by the read that meets it.
func TestALinkMadeAfterOpenIsNotFollowed(t *testing.T) {
	d := openTemp(t)
	target := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(target, []byte("someone else's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{StateFile, PIDFile} {
		if err := os.Symlink(target, filepath.Join(d.Path(), name)); err != nil {
			t.Fatal(err)
		}
	}
	s := sample()
	if _, err := d.Load(s.ZK, s.Root); !errors.Is(err, ErrSymlink) {
		t.Errorf("Load with the state file a link: %v, want ErrSymlink", err)
	}
	if _, err := ReadPID(d.Path()); !errors.Is(err, ErrSymlink) {
		t.Errorf("ReadPID with the pid file a link: %v, want ErrSymlink", err)
	}
	wantUntouched(t, target)
}

// wantUntouched fails t unless the file at target still holds what the
// tests wrote there, with its mode.
func wantUntouched(t *testing.T, target string) {
	t.Helper()
	b, err := os.ReadFile(target)
	if err != nil || string(b) != "someone else's\n" {
		t.Errorf("the link's target: %q, %v; want it untouched", b, err)
	}
	if m := mode(t, target); m != 0o644 {
		t.Errorf("the link's target: mode %04o, want its 0644 untouched", m)
	}
}
