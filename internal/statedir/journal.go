package statedir

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// JournalFile is the prefix of a journal's name: the journal of the base
// state whose Journal field is G is JournalFile + "-" + G.
const JournalFile = "journal"

// journalMin is the size a journal is made with (preallocated, so that an
// append never needs a block the disk does not have); a journal is made
// twice its base's size when that is larger. When it is full, the Journal
// compacts.
const journalMin = 4 << 20

// lazyWrite is how soon a change that no Commit waits for (a lease expired,
// a hold lost, a stream's lease pinned) is written.
const lazyWrite = 20 * time.Millisecond

// ErrStateUnavailable is the error (wrapped) of Commit and Err while the
// state directory cannot be written: nothing that changed since the last
// write that succeeded is on disk.
var ErrStateUnavailable = errors.New("state directory not writable")

// ErrJournalClosed is Commit's and Flush's error once the Journal is closed.
var ErrJournalClosed = errors.New("state journal closed")

// Source is what a Journal reads the state from, on the goroutine that
// writes (a request's, in Commit, or the Journal's own): each function must
// be safe to call alongside the request path.
type Source struct {
	// Session is the ZooKeeper session now (ID 0 before a server answered).
	Session func() Session
	// Lease is one lease as it is now, its Holds left out (Hold gives each);
	// false once it has ended.
	Lease func(id string) (Lease, bool)
	// Hold is one hold of a lease as it is now; false once it is not held.
	Hold func(lease, kind, name string) (Hold, bool)
	// Leases is every live lease now, with their holds, for a compaction.
	Leases func() []Lease
}

// JournalOption changes a Journal.
type JournalOption func(*Journal)

// SyncEvery has a Journal make its appends durable against a crash of the
// machine (fsync) at most d after them. Without it, or with d <= 0, they are
// synced each second. An append is in the page cache, where a successor of a
// killed process reads it, as soon as it is written.
func SyncEvery(d time.Duration) JournalOption { return func(j *Journal) { j.syncEvery = d } }

// OnJournalWrite has the Journal call f after every write it tries with the
// write's error (nil for a success). f must not block.
func OnJournalWrite(f func(error)) JournalOption { return func(j *Journal) { j.onWrite = f } }

// Journal keeps the directory's state current, durable before answers: a
// change calls Changed or HoldChanged (a map insert under a short lock, no
// I/O), and a request that must not be answered before its change is on
// disk calls Commit, which returns once every change recorded before it is
// written. Whoever commits writes everything recorded so far, so concurrent
// requests share a write (a group commit, as ZooKeeper's own log does), and
// a change nobody commits is written within lazyWrite by the Journal's
// goroutine.
//
// On disk the state is a base (StateFile, a whole State written by an atomic
// rename) and the journal that follows it (JournalFile-G, one JSON record a
// line: a lease's own values, one of its holds granted or let go, a lease
// ended, the session). The journal is preallocated and mapped into memory
// shared with the page cache: an append is a copy into the mapping, its
// newline stored last, and is in the page cache (where a successor of this
// process, however it died, reads it) when the copy is done; no system call
// is made. A record cut short by the process's death lacks its newline and
// acknowledged nothing: Load ignores it. When the journal is full, or a write
// failed, the Journal compacts: a new journal G+1, preallocated, then a base
// that names G+1 replaces the old one (synced), then journal G is removed; a
// death at any step leaves a base whose journal is whole.
//
// A compaction that fails (a full or read-only disk: the preallocation or the
// base's write fails) is retried by the Journal's goroutine, backing off to a
// second; until one succeeds Err reports it and Commit returns it.
type Journal struct {
	d         *Dir
	src       Source
	zk, root  string
	syncEvery time.Duration
	onWrite   func(error)

	mu           sync.Mutex // the changes recorded
	dirty        map[change]struct{}
	spare        map[change]struct{} // dirty's next, empty (guarded by wmu)
	sessionDirty bool
	seq          uint64 // changes recorded
	armed        bool   // lazyT is running: a change waits for it or a Commit
	lazyT        *time.Timer

	written atomic.Uint64 // seq covered by the last write that succeeded
	lastErr atomic.Pointer[error]

	wmu      sync.Mutex // the writer's: one write at a time
	buf      []byte     // the lines being written, reused
	f        *os.File
	m        []byte // the journal's mapping
	off      int    // where the next record goes in m
	gen      int64
	broken   bool // compact at the next write
	closed   bool
	unsynced bool

	failed chan struct{} // a write failed: retry
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

// change is what a journal records: a lease (kind and name empty) or one hold
// of it.
type change struct{ lease, kind, name string }

// Journal starts a Journal that writes the state of src for a sidecar run
// with --zk zk and --zk-root root. Its first write is a compaction: the whole
// state replaces whatever the directory held, so start it only once the
// process's state is the one to keep (after a restart's reconcile). That
// write is made by the first Commit (nothing is written before), so that the
// caller can have every change told to the Journal before it (Changed, and
// so on) and lose none between the two. The Journal is the Dir's: Dir.Close
// closes it.
func (d *Dir) Journal(src Source, zk, root string, opts ...JournalOption) (*Journal, error) {
	j := &Journal{
		d: d, src: src, zk: zk, root: root, syncEvery: time.Second, onWrite: func(error) {},
		dirty: map[change]struct{}{}, spare: map[change]struct{}{}, broken: true,
		lazyT: time.NewTimer(time.Hour), failed: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	j.lazyT.Stop()
	for _, opt := range opts {
		opt(j)
	}
	if j.syncEvery <= 0 {
		j.syncEvery = time.Second
	}
	d.mu.Lock()
	if d.lock == nil {
		d.mu.Unlock()
		return nil, d.closedErr()
	}
	d.journals = append(d.journals, j)
	d.mu.Unlock()
	j.mu.Lock()
	j.seq++ // the first compaction, made by the first Commit
	j.mu.Unlock()
	go j.run()
	return j, nil
}

// Changed records that lease id changed (granted, kept alive, pinned, ended);
// its holds are recorded apart (HoldChanged). It never blocks and does no I/O.
func (j *Journal) Changed(id string) { j.mark(change{lease: id}) }

// HoldChanged records that a hold of lease id changed (granted, let go,
// lost).
func (j *Journal) HoldChanged(id, kind, name string) { j.mark(change{id, kind, name}) }

// SessionChanged records that the ZooKeeper session changed (a new session
// after an expiry, the first answer of a server).
func (j *Journal) SessionChanged() {
	j.mu.Lock()
	j.sessionDirty = true
	j.mu.Unlock()
	j.mark(change{})
}

// mark records c; the zero change only counts. The first change after the
// lazy timer fired starts it again: under load it fires once per lazyWrite,
// not once per change, and at rest never.
func (j *Journal) mark(c change) {
	j.mu.Lock()
	if c != (change{}) {
		j.dirty[c] = struct{}{}
	}
	j.seq++
	if !j.armed {
		j.armed = true
		j.lazyT.Reset(lazyWrite)
	}
	j.mu.Unlock()
}

// Commit returns nil once every change recorded before the call is written:
// at once when it already is, else after writing what is recorded (or
// waiting for the write under way, which may cover it). It returns the
// write's error (ErrStateUnavailable, wrapped) when that write fails, ctx's
// cause when ctx ended before, ErrJournalClosed once the Journal is closed.
func (j *Journal) Commit(ctx context.Context) error {
	j.mu.Lock()
	target := j.seq
	j.mu.Unlock()
	if j.written.Load() >= target {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if j.written.Load() >= target {
		return nil
	}
	if j.closed {
		return ErrJournalClosed
	}
	return j.writeLocked()
}

// Err is the last write's error (ErrStateUnavailable, wrapped), nil after a
// write that succeeded.
func (j *Journal) Err() error {
	if p := j.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Flush writes what changed and syncs it, for a planned hand-over: once it
// returns nil the directory holds everything recorded before the call,
// durably.
func (j *Journal) Flush(ctx context.Context) error {
	if err := j.Commit(ctx); err != nil {
		return err
	}
	return j.sync()
}

// Close stops the Journal, waits for its goroutine and unmaps the journal;
// nothing more is written (Flush first to keep what changed). Close is
// idempotent.
func (j *Journal) Close() {
	j.once.Do(func() { close(j.stop) })
	<-j.done
	j.wmu.Lock()
	defer j.wmu.Unlock()
	if !j.closed {
		j.closed = true
		j.unmapLocked()
	}
}

// run writes the changes no Commit waits for, retries a failed write, and
// syncs the journal.
func (j *Journal) run() {
	defer close(j.done)
	defer j.lazyT.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	syncT := time.NewTicker(j.syncEvery)
	defer syncT.Stop()
	pause := 50 * time.Millisecond
	for {
		select {
		case <-j.stop:
			return
		case <-j.failed:
			retry.Reset(pause)
			pause = min(2*pause, time.Second)
			continue
		case <-syncT.C:
			if err := j.sync(); err != nil {
				j.d.log.Warn("state directory: sync failed", "err", err)
			}
			continue
		case <-j.lazyT.C:
			j.mu.Lock()
			j.armed = false
			j.mu.Unlock()
		case <-retry.C:
		}
		if err := j.Commit(context.Background()); err == nil {
			pause = 50 * time.Millisecond
		}
	}
}

// writeLocked writes everything recorded: an append into the mapping, or a
// compaction when the journal is broken or has no room. j.wmu is held.
func (j *Journal) writeLocked() error {
	j.mu.Lock()
	changes, sess, upto := j.dirty, j.sessionDirty, j.seq
	j.dirty, j.sessionDirty = j.spare, false
	j.mu.Unlock()
	defer j.keepSpare(changes)
	var err error
	if !j.broken {
		var buf []byte
		if buf, err = j.encode(changes, sess); err == nil && j.off+len(buf) > len(j.m) {
			j.broken = true // no room: the compaction writes it all
		} else if err == nil {
			err = j.appendLocked(buf)
		}
	}
	if err == nil && j.broken {
		err = j.compactLocked()
	}
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrStateUnavailable, err)
		j.mu.Lock()
		for c := range changes {
			j.dirty[c] = struct{}{}
		}
		j.sessionDirty = j.sessionDirty || sess
		j.mu.Unlock()
		j.broken = true
		j.lastErr.Store(&err)
		select {
		case j.failed <- struct{}{}: // run retries
		default:
		}
	} else {
		j.written.Store(upto)
		j.lastErr.Store(nil)
	}
	j.onWrite(err)
	return err
}

// keepSpare makes the map a write took its changes from the next write's
// dirty map, emptied, unless it grew large (a burst, a restore): emptying a
// large map costs its size at every write after. j.wmu is held.
func (j *Journal) keepSpare(m map[change]struct{}) {
	if len(m) > 256 {
		j.spare = map[change]struct{}{}
		return
	}
	clear(m)
	j.spare = m
}

// appendLocked copies buf (whole lines) into the mapping, each line's
// newline after the rest of it: a process killed during the copy leaves a
// last line without its newline, which a replay ignores. A fault on the
// mapping (the file made immutable, an I/O error, a file system gone
// read-only) is an error, not the process's end (debug.SetPanicOnFault); the
// journal is then broken and never appended to again.
func (j *Journal) appendLocked(buf []byte) (err error) {
	if len(buf) == 0 {
		return nil
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("append to %s: a fault on its mapping: %v", j.f.Name(), r)
		}
	}()
	dst := j.m[j.off : j.off+len(buf)]
	copy(dst[:len(buf)-1], buf[:len(buf)-1])
	// Stored after the copy returned: a process killed at any instant has
	// either every byte of the line in the page cache, or no newline.
	dst[len(buf)-1] = '\n'
	j.off += len(buf)
	j.unsynced = true
	return nil
}

// record is one line of a journal: exactly one field is set. Lease is a
// lease without its holds (a new one, or new values of a known one, whose
// holds stay); Hold one hold of a lease, granted or still held; Drop a hold
// let go; End a lease ended with everything it held.
type record struct {
	Lease   *Lease     `json:"lease,omitempty"`
	Hold    *leaseHold `json:"hold,omitempty"`
	Drop    *leaseHold `json:"drop,omitempty"`
	End     string     `json:"end,omitempty"`
	Session *Session   `json:"session,omitempty"`
}

// leaseHold is a hold with the lease it belongs to.
type leaseHold struct {
	Lease string `json:"lease"`
	Hold
}

// encode is the lines that record the changes as they now are: the session,
// the leases, then their holds, then the ends, so that a replay meets a
// lease before its holds.
func (j *Journal) encode(changes map[change]struct{}, sess bool) ([]byte, error) {
	var leases, holds, ends []record
	for c := range changes {
		if c.kind != "" {
			if _, ended := changes[change{lease: c.lease}]; ended {
				// The lease's own line follows: when it has ended, its end
				// says this hold is gone too, so a hold granted and let go
				// within one write costs nothing. (When it lives, the hold's
				// line is needed.)
				if _, live := j.src.Lease(c.lease); !live {
					continue
				}
			}
			// A hold is read alone: a drop of a hold whose lease has ended
			// is harmless (the lease's end follows it, and a replay ignores
			// a drop on a lease it does not know).
			if h, held := j.src.Hold(c.lease, c.kind, c.name); held {
				holds = append(holds, record{Hold: &leaseHold{c.lease, h}})
			} else {
				holds = append(holds, record{Drop: &leaseHold{c.lease, Hold{Kind: c.kind, Name: c.name}}})
			}
			continue
		}
		if l, live := j.src.Lease(c.lease); live {
			l.Holds = nil
			leases = append(leases, record{Lease: &l})
		} else {
			ends = append(ends, record{End: c.lease})
		}
	}
	buf := j.buf[:0]
	var err error
	if sess {
		s := j.src.Session()
		if buf, err = appendRecord(buf, record{Session: &s}); err != nil {
			return nil, err
		}
	}
	for _, group := range [][]record{leases, holds, ends} {
		for _, r := range group {
			if buf, err = appendRecord(buf, r); err != nil {
				return nil, err
			}
		}
	}
	j.buf = buf
	return buf, nil
}

// compactLocked writes the whole state as a new base with a new, empty,
// preallocated journal, and maps it.
func (j *Journal) compactLocked() error {
	if err := j.d.owned(); err != nil {
		return err
	}
	next := j.gen + 1
	if j.gen == 0 { // above whatever a predecessor left, so no journal it names is emptied
		next = max(time.Now().UnixNano(), j.d.loadedGen()+1)
	}
	leases := j.src.Leases()
	sort.Slice(leases, func(a, b int) bool { return leases[a].ID < leases[b].ID })
	st := State{ZK: j.zk, Root: j.root, Session: j.src.Session(), Leases: leases, Journal: next}
	base, err := encodeState(st)
	if err != nil {
		return err
	}
	name := journalName(next)
	f, m, err := createJournal(j.d.path, name, max(journalMin, 2*len(base)))
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	if err := j.d.writeBase(base); err != nil {
		_ = unmap(m)
		_ = f.Close()
		_ = os.Remove(filepath.Join(j.d.path, name))
		return err
	}
	j.unmapLocked()
	j.f, j.m, j.off, j.gen, j.broken, j.unsynced = f, m, 0, next, false, false
	j.d.removeJournals(next)
	return nil
}

// unmapLocked lets go of the journal in use.
func (j *Journal) unmapLocked() {
	if j.m != nil {
		_ = unmap(j.m)
		j.m = nil
	}
	if j.f != nil {
		_ = j.f.Close()
		j.f = nil
	}
}

// sync makes the journal's appends durable. The fsync itself runs outside
// the writer's lock, so that commits go on meanwhile.
func (j *Journal) sync() error {
	j.wmu.Lock()
	if j.f == nil || !j.unsynced {
		j.wmu.Unlock()
		return nil
	}
	f, err := dupFile(j.f)
	j.unsynced = false
	j.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("%w: sync: %w", ErrStateUnavailable, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", ErrStateUnavailable, f.Name(), err)
	}
	return nil
}

func journalName(gen int64) string { return JournalFile + "-" + strconv.FormatInt(gen, 10) }

// createJournal makes dir/name (0600, never through a symbolic link) of size
// bytes, preallocated, and maps it shared.
func createJournal(dir, name string, size int) (*os.File, []byte, error) {
	f, err := openPrivate(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, privateMode)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*os.File, []byte, error) {
		_ = f.Close()
		_ = os.Remove(filepath.Join(dir, name))
		return nil, nil, err
	}
	if err := f.Chmod(privateMode); err != nil {
		return fail(err)
	}
	if err := preallocate(f, int64(size)); err != nil {
		return fail(err)
	}
	m, err := mapShared(f, size)
	if err != nil {
		return fail(err)
	}
	return f, m, nil
}
