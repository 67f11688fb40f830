package statedir

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// The files of a state directory are private to their owner and are never
// symbolic links: the state file carries the session's password, and a link
// in its place (or the lock file's, or the pid file's) would have the sidecar
// read, lock or replace a file elsewhere, of someone else's choosing. Every
// file is opened without following a link (O_NOFOLLOW), Open refuses a
// directory where one of the three names is a link, and a file read or moved
// aside that is open to others is tightened to 0600 (a state file copied in
// with cp keeps, or widens to, the copier's umask).

// ErrSymlink is the error (wrapped) when a state directory's file is a
// symbolic link: it is refused, never followed.
var ErrSymlink = errors.New("is a symbolic link: refused, not followed")

// privateMode is the mode of every file of a state directory.
const privateMode fs.FileMode = 0o600

// checkNoLinks fails when one of the directory's own files is a symbolic link
// (or anything but a regular file).
func checkNoLinks(dir string) error {
	for _, name := range []string{LockFile, PIDFile, StateFile} {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("state directory %s: %w", dir, err)
		}
		if err := regular(fi); err != nil {
			return fmt.Errorf("state directory %s: %s %w", dir, name, err)
		}
	}
	return nil
}

// regular fails for anything but a regular file: ErrSymlink for a link.
func regular(fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return ErrSymlink
	case !fi.Mode().IsRegular():
		return fmt.Errorf("is not a regular file (%s): refused", fi.Mode().Type())
	}
	return nil
}

// openPrivate opens path without following a symbolic link (ErrSymlink if it
// is one) and fails unless it is a regular file.
func openPrivate(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNoFollow, perm)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%s %w", path, ErrSymlink)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = regular(fi)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s %w", path, err)
	}
	return f, nil
}

// readPrivate reads the file at path (openPrivate); with tighten, it makes it
// 0600 if it is open to others, and tightened reports the mode it had then.
func readPrivate(path string, tighten bool) (data []byte, tightened fs.FileMode, err error) {
	f, err := openPrivate(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	if fi, err := f.Stat(); tighten && err == nil && fi.Mode().Perm()&^privateMode != 0 {
		if err := f.Chmod(privateMode); err != nil {
			return nil, 0, fmt.Errorf("%s: tighten mode %04o to 0600: %w", path, fi.Mode().Perm(), err)
		}
		tightened = fi.Mode().Perm()
	}
	data, err = io.ReadAll(f)
	return data, tightened, err
}

// readState reads the state file for Load: never through a link, and
// tightened to 0600 (logged) if it was open to others.
func (d *Dir) readState(path string) ([]byte, error) {
	data, was, err := readPrivate(path, true)
	if was != 0 {
		d.log.Warn("state file was open to others: its mode is now 0600", "file", path, "was", fmt.Sprintf("%04o", was))
	}
	return data, err
}

// renameAside renames from to to (a bad state file kept for inspection) and
// makes the file kept 0600, whatever mode it came with: it may still carry a
// session's password.
func renameAside(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	f, err := openPrivate(to, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = f.Chmod(privateMode)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
