package statedir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// The names of the files in a state directory.
const (
	// LockFile is the file whose flock(2) makes a process the directory's owner.
	LockFile = "coord-sidecar.lock"
	// PIDFile holds the pid of the process that serves, in decimal and a newline.
	PIDFile = "coord-sidecar.pid"
	// StateFile holds the State as JSON.
	StateFile = "state.json"
)

// tmpMark is in the name of every temporary file of an atomic write; Open
// removes what a crash left of them.
const tmpMark = ".tmp-"

// ErrInUse is the error (wrapped in an *InUseError) of Open and Adopt when
// another open file description, in this process or another, owns the directory.
var ErrInUse = errors.New("state directory in use")

// InUseError says who owns a state directory that Open could not take.
type InUseError struct {
	Dir string
	// PID is the owner's pid as its pid file names it; 0 when the file is
	// missing, unreadable or names no live process (an owner that has not
	// written its own yet).
	PID int
}

func (e *InUseError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("state directory %s is in use by another process (%s names none yet)", e.Dir, PIDFile)
	}
	return fmt.Sprintf("state directory %s is in use by process %d (its %s)", e.Dir, e.PID, PIDFile)
}

// Unwrap makes errors.Is(err, ErrInUse) hold.
func (e *InUseError) Unwrap() error { return ErrInUse }

// Option changes how a directory is opened.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// WithLogger has Open, OpenWait and Adopt log what they change in the
// directory (a mode tightened, leftovers of a crashed write removed) to log.
// Without it nothing is logged.
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.log = log } }

func newOptions(opts []Option) options {
	o := options{log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Dir is an owned state directory. Its methods are safe for concurrent use.
type Dir struct {
	path string
	log  *slog.Logger

	saveMu sync.Mutex // serializes Save, Load and Clear

	mu       sync.Mutex
	lock     *os.File // nil once closed
	pid      int      // what WritePID last wrote, 0 before
	gen      int64    // the journal generation Load last read
	journals []*Journal
}

// Open makes dir (and its parents) if missing, with mode 0700, tightens an
// existing one to 0700, and takes it: an exclusive lock that lasts until Close
// or the end of the process. When another process (or another Open in this
// process) holds it, Open fails at once with an *InUseError naming the
// holder's pid. Leftovers of writes that a crash cut short are removed.
func Open(dir string, opts ...Option) (*Dir, error) {
	o := newOptions(opts)
	path, err := prepare(dir, o.log)
	if err != nil {
		return nil, err
	}
	if err := checkNoLinks(path); err != nil {
		return nil, err
	}
	f, err := openPrivate(filepath.Join(path, LockFile), os.O_RDWR|os.O_CREATE, privateMode)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		_ = f.Close()
		return nil, inUse(path, err)
	}
	d := &Dir{path: path, log: o.log, lock: f}
	d.removeLeftovers()
	return d, nil
}

// OpenWait is Open that waits for the holder to end (or to Close) instead of
// failing, until ctx ends; then it returns the *InUseError that names the
// holder, joined with ctx's error. Errors other than the directory being in
// use are returned at once.
func OpenWait(ctx context.Context, dir string, opts ...Option) (*Dir, error) {
	pause := 10 * time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		d, err := Open(dir, opts...)
		if !errors.Is(err, ErrInUse) {
			return d, err
		}
		t.Reset(pause)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited: %w)", err, context.Cause(ctx))
		case <-t.C:
		}
		pause = min(2*pause, time.Second)
	}
}

// Adopt takes the directory dir over through f, the lock file's descriptor
// that its owner passed to this process (Dir.File, then exec.Cmd.ExtraFiles:
// os.NewFile(3, ...) in the successor). The lock is held by the open file
// description that f shares with the owner, so the directory is never free in
// between: after Adopt both processes hold it, and it stays held until both
// have closed their descriptors (or ended); the owner then Closes its Dir. f must be the lock file of dir
// (else Adopt fails and closes f); the Dir owns f from then on.
func Adopt(dir string, f *os.File, opts ...Option) (*Dir, error) {
	o := newOptions(opts)
	path, err := prepare(dir, o.log)
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	if err := sameFile(f, filepath.Join(path, LockFile)); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("state directory %s: adopt: %w", path, err)
	}
	// On the description that holds it, this confirms the lock; on one that
	// does not (the owner closed first), it takes the lock if it is free.
	if err := tryLock(f); err != nil {
		_ = f.Close()
		return nil, inUse(path, err)
	}
	// Leftovers are not removed: the predecessor still runs and may be writing.
	return &Dir{path: path, log: o.log, lock: f}, nil
}

// inUse is the error of a lock refused by err.
func inUse(path string, err error) error {
	if !errors.Is(err, errWouldBlock) {
		return fmt.Errorf("state directory %s: lock: %w", path, err)
	}
	pid, _ := ReadPID(path)
	if pid != 0 && !alive(pid) {
		pid = 0 // left by a killed owner; the holder has not written its own yet
	}
	return &InUseError{Dir: path, PID: pid}
}

// prepare makes the directory, checks its owner and tightens its mode; it
// returns its absolute path.
func prepare(dir string, log *slog.Logger) (string, error) {
	if dir == "" {
		return "", errors.New("state directory: no path given")
	}
	path, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("state directory %s: %w", dir, err)
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return "", fmt.Errorf("state directory %s: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("state directory %s: %w", path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("state directory %s: not a directory", path)
	}
	if err := checkOwner(fi); err != nil {
		return "", fmt.Errorf("state directory %s: %w", path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(path, 0o700); err != nil {
			return "", fmt.Errorf("state directory %s: tighten mode %04o to 0700: %w", path, perm, err)
		}
		log.Warn("state directory was open to others: its mode is now 0700", "dir", path, "was", fmt.Sprintf("%04o", perm))
	}
	return path, nil
}

// removeLeftovers removes the temporary files of atomic writes that a crash
// cut short. Only the owner writes them, so none is in use.
func (d *Dir) removeLeftovers() {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.Contains(e.Name(), tmpMark) || e.IsDir() {
			continue
		}
		if err := os.Remove(filepath.Join(d.path, e.Name())); err == nil {
			d.log.Info("state directory: removed what a cut-short write left", "file", e.Name())
		}
	}
}

// Path is the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// File returns a new descriptor of the locked lock file for a successor
// process (put it in exec.Cmd.ExtraFiles; the successor calls Adopt). The
// successor then holds the lock with this process: the caller closes the
// returned file once the successor started, and this Dir when the successor
// has adopted. The returned file is not closed on exec by itself: only the
// process it is passed to explicitly gets it.
func (d *Dir) File() (*os.File, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return nil, fs.ErrClosed
	}
	return dupFile(d.lock)
}

// Close stops every Journal of the directory (waiting for their goroutines),
// removes the pid file if it still names the pid this Dir wrote, and closes
// the lock file. The lock is released as soon as no process holds a
// descriptor of it: at once, unless File handed one to a successor, which
// then keeps the directory. Close is idempotent.
func (d *Dir) Close() error {
	d.mu.Lock()
	journals := d.journals
	d.journals = nil
	d.mu.Unlock()
	for _, j := range journals {
		j.Close()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return nil
	}
	if d.pid != 0 {
		if pid, err := ReadPID(d.path); err == nil && pid == d.pid {
			_ = os.Remove(filepath.Join(d.path, PIDFile))
		}
	}
	err := d.lock.Close()
	d.lock = nil
	return err
}

// owned fails once the Dir is closed.
func (d *Dir) owned() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return d.closedErr()
	}
	return nil
}

func (d *Dir) closedErr() error { return fmt.Errorf("state directory %s: %w", d.path, fs.ErrClosed) }
