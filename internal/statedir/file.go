package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// writeAtomic replaces dir/name with data, durably: a temporary file in dir
// (mode 0600) is written and synced, renamed over name, and dir is synced. A
// crash at any point leaves either the old file or the new one, whole; the
// temporary file it may leave is ignored by readers and removed by Open.
func writeAtomic(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, name+tmpMark+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil { // CreateTemp's mode already; the umask cannot widen it
		_ = f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

// syncDir makes the directory's entries (a rename, a removal) durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// WritePID records pid as the process that serves from this directory, in
// PIDFile (mode 0600), atomically: a reader sees the previous pid or this one,
// never a part. The successor of a planned hand-over writes its own once it
// serves; Close removes the file only while it still names this pid.
func (d *Dir) WritePID(pid int) error {
	if pid <= 0 {
		return fmt.Errorf("state directory %s: pid %d", d.path, pid)
	}
	if err := d.owned(); err != nil {
		return err
	}
	if err := writeAtomic(d.path, PIDFile, []byte(strconv.Itoa(pid)+"\n")); err != nil {
		return fmt.Errorf("state directory %s: write %s: %w", d.path, PIDFile, err)
	}
	d.mu.Lock()
	d.pid = pid
	d.mu.Unlock()
	return nil
}

// LeavePID has Close leave PIDFile as it is, naming this process, for a
// planned hand-over: the successor writes its own pid over it (atomically)
// once it owns the directory, so that the file never goes missing in between
// and a supervisor that reads it when this process exits (systemd's
// PIDFile=) finds the successor there.
func (d *Dir) LeavePID() {
	d.mu.Lock()
	d.pid = 0
	d.mu.Unlock()
}

// ReadPID reads the pid that dir's PIDFile names. It needs no ownership of
// the directory (an operator's kill -USR2 $(cat ...) reads the same).
func ReadPID(dir string) (int, error) {
	b, _, err := readPrivate(filepath.Join(dir, PIDFile), false) // read by others too: never changed
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, errors.New(PIDFile + ": not a pid: " + strconv.Quote(string(b)))
	}
	return pid, nil
}
