//go:build unix

package statedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// errWouldBlock is what tryLock returns when another description holds the lock.
var errWouldBlock = syscall.EWOULDBLOCK

// tryLock takes f's exclusive flock without waiting.
func tryLock(f *os.File) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lockErr error
	if err := conn.Control(func(fd uintptr) {
		for {
			lockErr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(lockErr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	return lockErr
}

// dupFile is a new descriptor of f's open file description (so it shares f's
// lock), closed on exec unless passed on explicitly.
func dupFile(f *os.File) (*os.File, error) {
	conn, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var dupErr error
	if err := conn.Control(func(fd uintptr) {
		nfd, dupErr = fcntlDupCloexec(int(fd))
	}); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, dupErr
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

func fcntlDupCloexec(fd int) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	nfd, err := syscall.Dup(fd)
	if err != nil {
		return 0, err
	}
	syscall.CloseOnExec(nfd)
	return nfd, nil
}

// sameFile fails unless f is the file at path.
func sameFile(f *os.File, path string) error {
	got, err := f.Stat()
	if err != nil {
		return err
	}
	want, err := os.Lstat(path) // the lock file itself, never what a link names
	if err != nil {
		return err
	}
	if !os.SameFile(got, want) {
		return errors.New("the descriptor given is not the directory's lock file")
	}
	return nil
}

// checkOwner refuses a directory that another user owns.
func checkOwner(fi fs.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	if euid := os.Geteuid(); int(st.Uid) != euid {
		return fmt.Errorf("owned by uid %d, not by this process's uid %d: its owner could read and replace the session's password", st.Uid, euid)
	}
	return nil
}

// alive reports whether a process pid exists (it may belong to another user).
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
