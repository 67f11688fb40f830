package statedir

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// JournalFile is the prefix of a journal's name: the journal of the base
// state whose Journal field is G is JournalFile + "-" + G.
const JournalFile = "journal"

// lazyWrite is how soon a change that no Commit waits for (a lease expired,
// a hold lost, a stream's lease pinned) is written.
const lazyWrite = 20 * time.Millisecond

// compactMin is the journal size under which a Journal never compacts: a
// compaction rewrites the whole state, an append only what changed.
const compactMin = 1 << 20

// ErrStateUnavailable is the error (wrapped) of Commit and Err while the
// state directory cannot be written: nothing that changed since the last
// write that succeeded is on disk.
var ErrStateUnavailable = errors.New("state directory not writable")

// ErrJournalClosed is Commit's and Flush's error once the Journal is closed.
var ErrJournalClosed = errors.New("state journal closed")

// Source is what a Journal reads the state from, on its own goroutine: each
// function must be safe to call alongside the request path.
type Source struct {
	// Session is the ZooKeeper session now (ID 0 before a server answered).
	Session func() Session
	// Lease is one lease as it is now, its Holds left out (Hold gives each);
	// false once it has ended.
	Lease func(id string) (Lease, bool)
	// Hold is one hold of a lease as it is now; false once it is not held.
	Hold func(lease, kind, name string) (Hold, bool)
	// Leases is every live lease now, for a compaction.
	Leases func() []Lease
}

// JournalOption changes a Journal.
type JournalOption func(*Journal)

// SyncEvery lets a Journal leave what it writes unsynced for up to d: each
// write reaches the file before Commit returns (a successor started after
// this process was killed reads it: the page cache outlives the process),
// and is made durable against a crash of the machine within d. Without it,
// or with d <= 0, every write is synced before Commit returns.
func SyncEvery(d time.Duration) JournalOption { return func(j *Journal) { j.syncEvery = d } }

// OnJournalWrite has the Journal call f after every write it tries, on its
// goroutine, with the write's error (nil for a success). f must not block.
func OnJournalWrite(f func(error)) JournalOption { return func(j *Journal) { j.onWrite = f } }

// Journal keeps the directory's state current, durable before answers: a
// change calls Changed (a map insert under a short lock, no I/O), and a
// request that must not be answered before its change is on disk calls
// Commit, which returns once a write that began after the change has
// succeeded. The Journal's one goroutine writes whatever has changed since
// its last write in one append, so concurrent requests share a write (a
// group commit, as ZooKeeper's own log does).
//
// On disk the state is a base (StateFile, a whole State written by an atomic
// rename) and the journal that follows it (JournalFile-G, one JSON record a
// line, appended: a lease as it now is, a lease that ended, the session).
// Load reads the base and replays its journal; a line cut short by the
// process's death is the last one and is ignored, since its write never
// returned and so acknowledged nothing. When the journal outgrows the base
// (and compactMin) it is compacted: a new empty journal G+1, then a base that
// names G+1 replaces the old one, then journal G is removed; a death at any
// step leaves a base whose journal is whole.
//
// A write that fails (a full or read-only disk) is retried, backing off to a
// second; until one succeeds Err reports it, and Commit returns it for every
// change that was not written. After a failure the next write is a
// compaction, so a partly written append is never followed by another.
type Journal struct {
	d         *Dir
	src       Source
	zk, root  string
	syncEvery time.Duration
	onWrite   func(error)

	mu           sync.Mutex
	dirty        map[change]struct{}
	sessionDirty bool
	seq          uint64 // changes marked
	attempted    uint64 // seq covered by the last write tried
	written      uint64 // seq covered by the last write that succeeded
	err          error  // the last write's error, nil after a success
	progress     chan struct{}

	wake    chan struct{}   // a Commit waits: write now
	lazy    chan struct{}   // a change no Commit waits for yet: write within lazyWrite
	armed   bool            // a token was sent on lazy since the last write (mu)
	syncReq chan chan error // Flush's syncs
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	// The goroutine's own.
	f        *os.File
	gen      int64
	size     int64
	baseSize int64
	broken   bool // the journal may end in a partial line: compact next
	unsynced bool
}

// Journal starts a Journal that writes the state of src for a sidecar run
// with --zk zk and --zk-root root. Its first write is a compaction: the whole
// state replaces whatever the directory held, so start it only once the
// process's state is the one to keep (after a restart's reconcile). The
// Journal is the Dir's: Dir.Close closes it.
func (d *Dir) Journal(src Source, zk, root string, opts ...JournalOption) (*Journal, error) {
	j := &Journal{
		d: d, src: src, zk: zk, root: root, onWrite: func(error) {},
		dirty: map[change]struct{}{}, progress: make(chan struct{}),
		wake: make(chan struct{}, 1), lazy: make(chan struct{}, 1), syncReq: make(chan chan error), stop: make(chan struct{}), done: make(chan struct{}),
		broken: true, // the first write is a compaction
	}
	for _, opt := range opts {
		opt(j)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.lock == nil {
		return nil, d.closedErr()
	}
	d.journals = append(d.journals, j)
	j.mu.Lock()
	j.seq++ // the first compaction is a change Commit can wait for
	j.mu.Unlock()
	go j.run()
	j.poke()
	return j, nil
}

// change is what a journal records: a lease (kind and name empty) or one hold
// of it.
type change struct{ lease, kind, name string }

// Changed records that lease id changed (granted, kept alive, pinned, ended);
// the next write records it as it then is, its holds apart. It never blocks
// and does no I/O.
func (j *Journal) Changed(id string) { j.mark(change{lease: id}) }

// HoldChanged records that a hold of lease id changed (granted, let go,
// lost); the next write records it as it then is.
func (j *Journal) HoldChanged(id, kind, name string) { j.mark(change{id, kind, name}) }

// mark records c. The write waits for a Commit (a request changes several
// things before it answers: they go in one append) or lazyWrite, whichever
// comes first.
func (j *Journal) mark(c change) {
	j.mu.Lock()
	j.dirty[c] = struct{}{}
	j.seq++
	arm := !j.armed
	j.armed = true
	j.mu.Unlock()
	if arm {
		select {
		case j.lazy <- struct{}{}:
		default:
		}
	}
}

// SessionChanged records that the ZooKeeper session changed (a new session
// after an expiry, the first answer of a server).
func (j *Journal) SessionChanged() {
	j.mu.Lock()
	j.sessionDirty = true
	j.seq++
	j.mu.Unlock()
	j.poke()
}

func (j *Journal) poke() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Commit returns nil once every change recorded before the call is written,
// at once when it already is; the write's error (ErrStateUnavailable, wrapped)
// when the write that covered them failed; ctx's cause when it ends first;
// ErrJournalClosed once the Journal is closed.
func (j *Journal) Commit(ctx context.Context) error {
	j.mu.Lock()
	target := j.seq
	if j.written < target {
		j.poke()
	}
	for {
		if j.written >= target {
			j.mu.Unlock()
			return nil
		}
		if j.attempted >= target && j.err != nil {
			err := j.err
			j.mu.Unlock()
			return err
		}
		ch := j.progress
		j.mu.Unlock()
		select {
		case <-ch:
		case <-j.done:
			return ErrJournalClosed
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		j.mu.Lock()
	}
}

// Err is the last write's error (ErrStateUnavailable, wrapped), nil after a
// write that succeeded.
func (j *Journal) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// Flush writes what changed and syncs it, for a planned hand-over: once it
// returns nil the directory holds everything recorded before the call, durably.
func (j *Journal) Flush(ctx context.Context) error {
	if err := j.Commit(ctx); err != nil {
		return err
	}
	reply := make(chan error, 1)
	select {
	case j.syncReq <- reply:
	case <-j.done:
		return ErrJournalClosed
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Close stops the Journal and waits for its goroutine; nothing more is
// written (Flush first to keep what changed). Close is idempotent.
func (j *Journal) Close() {
	j.once.Do(func() { close(j.stop) })
	<-j.done
}

func (j *Journal) run() {
	defer close(j.done)
	defer func() {
		if j.f != nil {
			_ = j.f.Close()
		}
	}()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	lazyT := time.NewTimer(time.Hour) // a change nobody waits for is written this soon
	lazyT.Stop()
	syncT := time.NewTimer(time.Hour)
	syncT.Stop()
	pause := 50 * time.Millisecond
	for {
		select {
		case <-j.stop:
			return
		case reply := <-j.syncReq:
			reply <- j.sync()
			continue
		case <-syncT.C:
			if err := j.sync(); err != nil {
				j.d.log.Warn("state directory: sync failed", "err", err)
			}
			continue
		case <-j.lazy:
			lazyT.Reset(lazyWrite)
			continue
		case <-lazyT.C:
		case <-retry.C:
		case <-j.wake:
		}
		err := j.writeOnce()
		if err != nil {
			retry.Reset(pause)
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 50 * time.Millisecond
		if j.unsynced {
			if j.syncEvery <= 0 {
				if err := j.sync(); err != nil {
					j.d.log.Warn("state directory: sync failed", "err", err)
				}
			} else {
				syncT.Reset(j.syncEvery)
			}
		}
	}
}

// writeOnce writes what changed since the last write: an append, or a
// compaction when the journal is broken or has outgrown its base.
func (j *Journal) writeOnce() error {
	j.mu.Lock()
	ids, sess, upto := j.dirty, j.sessionDirty, j.seq
	j.dirty, j.sessionDirty, j.armed = map[change]struct{}{}, false, false
	j.mu.Unlock()
	if upto == j.written && !j.broken {
		return nil
	}
	var err error
	if j.broken || j.size > max(compactMin, 2*j.baseSize) {
		err = j.compact()
	} else {
		err = j.appendChanges(ids, sess)
	}
	j.mu.Lock()
	j.attempted = upto
	if err != nil {
		err = fmt.Errorf("%w: %w", ErrStateUnavailable, err)
		for id := range ids {
			j.dirty[id] = struct{}{}
		}
		j.sessionDirty = j.sessionDirty || sess
		j.broken = true
	} else {
		j.written = upto
	}
	j.err = err
	close(j.progress)
	j.progress = make(chan struct{})
	j.mu.Unlock()
	j.onWrite(err)
	return err
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

// appendChanges appends a record of each change, the leases first, then
// their holds, then the ends, so that a replay meets a lease before its holds.
func (j *Journal) appendChanges(changes map[change]struct{}, sess bool) error {
	var leases, holds, ends []record
	for c := range changes {
		l, live := j.src.Lease(c.lease)
		switch {
		case !live && c.kind == "":
			ends = append(ends, record{End: c.lease})
		case !live:
		case c.kind == "":
			l.Holds = nil
			leases = append(leases, record{Lease: &l})
		default:
			h, held := j.src.Hold(c.lease, c.kind, c.name)
			if !held {
				h = Hold{Kind: c.kind, Name: c.name}
				holds = append(holds, record{Drop: &leaseHold{c.lease, h}})
			} else {
				holds = append(holds, record{Hold: &leaseHold{c.lease, h}})
			}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf) // one line per record
	if sess {
		s := j.src.Session()
		if err := enc.Encode(record{Session: &s}); err != nil {
			return err
		}
	}
	for _, group := range [][]record{leases, holds, ends} {
		for _, r := range group {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	if buf.Len() == 0 {
		return nil
	}
	if err := j.d.owned(); err != nil {
		return err
	}
	n, err := j.f.Write(buf.Bytes())
	j.size += int64(n)
	if err != nil {
		return fmt.Errorf("append to %s: %w", j.f.Name(), err)
	}
	j.unsynced = true
	return nil
}

// compact writes the whole state as a new base with a new, empty journal.
func (j *Journal) compact() error {
	next := j.gen + 1
	if j.gen == 0 { // above whatever a predecessor left, so no journal it names is emptied
		next = max(time.Now().UnixNano(), j.d.loadedGen()+1)
	}
	name := journalName(next)
	f, err := openJournal(j.d.path, name, true)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	leases := j.src.Leases()
	sort.Slice(leases, func(a, b int) bool { return leases[a].ID < leases[b].ID })
	st := State{ZK: j.zk, Root: j.root, Session: j.src.Session(), Leases: leases, Journal: next}
	size, err := j.d.saveBase(st)
	if err != nil {
		_ = f.Close()
		_ = os.Remove(filepath.Join(j.d.path, name))
		return err
	}
	if j.f != nil {
		_ = j.f.Close()
	}
	j.f, j.gen, j.size, j.baseSize, j.broken, j.unsynced = f, next, 0, size, false, false
	j.d.removeJournals(next)
	return nil
}

// sync makes the journal's appends durable.
func (j *Journal) sync() error {
	if j.f == nil || !j.unsynced {
		return nil
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", ErrStateUnavailable, j.f.Name(), err)
	}
	j.unsynced = false
	return nil
}

func journalName(gen int64) string { return JournalFile + "-" + strconv.FormatInt(gen, 10) }

// openJournal opens dir/name for appending (created 0600, emptied when
// create), refusing a symbolic link.
func openJournal(dir, name string, create bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_APPEND | noFollow
	if create {
		flags |= os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(filepath.Join(dir, name), flags, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// removeJournals removes every journal but keep's; an old one that cannot be
// removed is harmless (no base names it).
func (d *Dir) removeJournals(keep int64) {
	entries, err := os.ReadDir(d.path)
	if err != nil {
		return
	}
	for _, e := range entries {
		gen, ok := strings.CutPrefix(e.Name(), JournalFile+"-")
		if !ok || e.IsDir() || gen == strconv.FormatInt(keep, 10) {
			continue
		}
		_ = os.Remove(filepath.Join(d.path, e.Name()))
	}
}

// replay applies the journal of s (JournalFile-s.Journal) to s. A missing
// journal is an empty one; a last line without its newline is a write the
// process died in and is ignored; any other line that is not a record makes
// the state unusable.
func (d *Dir) replay(s *State) (string, error) {
	if s.Journal == 0 {
		return "", nil
	}
	name := journalName(s.Journal)
	data, err := readNoFollow(filepath.Join(d.path, name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	byID := make(map[string]*replayed, len(s.Leases))
	for _, l := range s.Leases {
		byID[l.ID] = newReplayed(l)
	}
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // cut short by the writer's death: never acknowledged
		}
		line := data[:i]
		data = data[i+1:]
		var r record
		if err := decodeOne(line, &r); err != nil {
			return fmt.Sprintf("%s line %d: %v", name, n, err), ErrCorrupt
		}
		if !apply(byID, s, r) {
			return fmt.Sprintf("%s line %d: an empty record", name, n), ErrCorrupt
		}
	}
	s.Leases = make([]Lease, 0, len(byID))
	for _, r := range byID {
		s.Leases = append(s.Leases, r.lease())
	}
	sort.Slice(s.Leases, func(a, b int) bool { return s.Leases[a].ID < s.Leases[b].ID })
	return "", nil
}

// replayed is a lease during a replay, its holds by kind and name.
type replayed struct {
	Lease
	holds map[[2]string]Hold
}

func newReplayed(l Lease) *replayed {
	r := &replayed{Lease: l, holds: make(map[[2]string]Hold, len(l.Holds))}
	for _, h := range l.Holds {
		r.holds[[2]string{h.Kind, h.Name}] = h
	}
	r.Holds = nil
	return r
}

// lease is the replayed lease, its holds sorted by kind and name.
func (r *replayed) lease() Lease {
	l := r.Lease
	l.Holds = make([]Hold, 0, len(r.holds))
	for _, h := range r.holds {
		l.Holds = append(l.Holds, h)
	}
	sort.Slice(l.Holds, func(a, b int) bool {
		if l.Holds[a].Kind != l.Holds[b].Kind {
			return l.Holds[a].Kind < l.Holds[b].Kind
		}
		return l.Holds[a].Name < l.Holds[b].Name
	})
	if len(l.Holds) == 0 {
		l.Holds = nil
	}
	return l
}

// apply replays one record on the leases by id and the state's session;
// false for a record that says nothing. A hold of a lease that is not known
// (it ended later in the same write) is passed over.
func apply(byID map[string]*replayed, s *State, r record) bool {
	switch {
	case r.Lease != nil:
		next := newReplayed(*r.Lease)
		if old := byID[r.Lease.ID]; old != nil {
			next.holds = old.holds
		}
		byID[r.Lease.ID] = next
	case r.Hold != nil:
		if l := byID[r.Hold.Lease]; l != nil {
			l.holds[[2]string{r.Hold.Kind, r.Hold.Name}] = r.Hold.Hold
		}
	case r.Drop != nil:
		if l := byID[r.Drop.Lease]; l != nil {
			delete(l.holds, [2]string{r.Drop.Kind, r.Drop.Name})
		}
	case r.Session != nil:
		s.Session = *r.Session
	case r.End != "":
		delete(byID, r.End)
	default:
		return false
	}
	return true
}

// readNoFollow reads a file, refusing a symbolic link.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(f)
	return buf.Bytes(), err
}

// Read reads the state in dir as Load would return it (the base with its
// journal replayed), without owning the directory and without checking or
// moving anything: for inspection while a sidecar runs on it. ErrNoState
// when there is none.
func Read(dir string) (State, error) {
	d := &Dir{path: dir}
	data, err := readNoFollow(filepath.Join(dir, StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, ErrNoState
	}
	if err != nil {
		return State{}, err
	}
	var s State
	if err := decodeOne(data, &s); err != nil {
		return State{}, fmt.Errorf("%s: %w: %w", StateFile, ErrCorrupt, err)
	}
	if detail, why := d.replay(&s); why != nil {
		return State{}, fmt.Errorf("%w: %s", why, detail)
	}
	return s, nil
}
