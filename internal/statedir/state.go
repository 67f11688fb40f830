package statedir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Format is the version of the State record that this package writes. A
// change that an older reader would misread gets a new number; a reader
// refuses every number but the ones it knows (ErrFormat). Format 2 added the
// journal (an older reader would miss what it holds) and Lease.Pinned; a
// format 1 state (a base without a journal) is still read, for the successor
// of an older sidecar.
const Format = 2

// formatsRead are the formats Load reads.
var formatsRead = []int{1, 2}

// State is what a successor needs to resume: the session and every lease with
// what it holds. Durations are written in nanoseconds, times in RFC 3339.
type State struct {
	// Format is the record's version; Save sets it to Format.
	Format int `json:"format"`
	// ZK is the --zk the state was written for, Root its --zk-root: Load
	// refuses a state written for others (ErrOtherZK, ErrOtherRoot).
	ZK   string `json:"zk"`
	Root string `json:"root"`
	// SavedAt is when the state was written; Save sets it.
	SavedAt time.Time `json:"savedAt"`
	Session Session   `json:"session"`
	Leases  []Lease   `json:"leases,omitempty"`
	// Journal names the journal that follows this base (JournalFile-Journal,
	// see Journal); 0 for none. Load returns the state with it replayed.
	Journal int64 `json:"journal,omitempty"`
}

// Session is the ZooKeeper session to take over.
type Session struct {
	ID int64 `json:"id"`
	// Password is the session's password: a secret (see docs/SECURITY.md).
	Password []byte `json:"password"`
	// Timeout is the session timeout the server negotiated.
	Timeout time.Duration `json:"timeout"`
	// LastZxid is the last zxid the connection saw (0 is always accepted by a
	// server; a higher one than the server's is refused).
	LastZxid int64 `json:"lastZxid"`
}

// Lease is one lease of the sidecar.
type Lease struct {
	ID  string        `json:"id"`
	TTL time.Duration `json:"ttl"`
	// ExpiresAt is the expiry its last keepalive set.
	ExpiresAt time.Time `json:"expiresAt"`
	// Pinned: something kept the lease alive when it was written (an open
	// keepalive stream, a waiting request), so its expiry was moving: a
	// successor gives its client the TTL from the resume to come back.
	Pinned bool `json:"pinned,omitempty"`
	// Owner names the token that made the lease ("" for none).
	Owner    string `json:"owner,omitempty"`
	Implicit bool   `json:"implicit,omitempty"`
	// StreamBound is set for a lease that ends with its client's stream.
	StreamBound bool `json:"streamBound,omitempty"`
	// Holds is what the lease holds.
	Holds []Hold `json:"holds,omitempty"`
	// Waiting is the requests of the lease that were still waiting: their
	// nodes are removed by the successor, never granted to nobody.
	Waiting []Pending `json:"waiting,omitempty"`
}

// Hold is one thing a lease holds.
type Hold struct {
	// Kind is the recipe ("lock", "semaphore", "rwlock", "kv", ...), Name the
	// thing's name in it.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Nodes is the full path of every ZooKeeper node the hold owns.
	Nodes []string `json:"nodes"`
	// Data is what else the recipe needs to resume the hold, in its own
	// encoding (a claim's id, a partition's token); nil for none.
	Data json.RawMessage `json:"data,omitempty"`
}

// Pending is a request in flight: a protected create whose node may exist.
type Pending struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Parent is the full path of the node under which the create was sent.
	Parent string `json:"parent"`
	// GUID is the protected create's GUID (the node is Parent/_c_<GUID>-...).
	GUID string `json:"guid"`
}

// The errors of Load, each wrapped in a *BadStateError except ErrNoState.
var (
	// ErrNoState: there is no state file (a first start, or the one after a
	// bad file was moved aside): nothing to resume, nothing to warn of.
	ErrNoState = errors.New("no saved state")
	// ErrCorrupt: the file is not a State in JSON.
	ErrCorrupt = errors.New("not a state record")
	// ErrTruncated: the file ends in the middle of its JSON. It is an
	// ErrCorrupt too.
	ErrTruncated = fmt.Errorf("%w: truncated", ErrCorrupt)
	// ErrFormat: the record is of another format version (or of none).
	ErrFormat = errors.New("another format version")
	// ErrOtherZK: the state was written for another --zk.
	ErrOtherZK = errors.New("written for another --zk")
	// ErrOtherRoot: the state was written for another --zk-root.
	ErrOtherRoot = errors.New("written for another --zk-root")
)

// BadStateError is Load's error for a state file it could not use. The file
// has been moved aside to MovedTo (unless MoveErr says why not), so the next
// Load reports ErrNoState.
type BadStateError struct {
	Path string
	// Err is one of ErrCorrupt, ErrTruncated, ErrFormat, ErrOtherZK,
	// ErrOtherRoot; Detail says more.
	Err     error
	Detail  string
	MovedTo string
	MoveErr error
}

// Error is one line: which file, why, and where it went.
func (e *BadStateError) Error() string {
	where := "moved aside to " + e.MovedTo
	if e.MoveErr != nil {
		where = "could not be moved aside: " + e.MoveErr.Error()
	}
	return fmt.Sprintf("state file %s unused: %v (%s); %s", e.Path, e.Err, e.Detail, where)
}

// Unwrap makes errors.Is(err, ErrFormat) and the like hold.
func (e *BadStateError) Unwrap() error { return e.Err }

// Save writes s (with Format and SavedAt set) as the directory's state,
// atomically and durably: once Save returns nil, a Load after any crash reads
// s; if Save fails or the process dies during it, Load reads the previous
// state. Save calls are serialized with each other.
func (d *Dir) Save(s State) error {
	_, err := d.saveBase(s)
	return err
}

// saveBase is Save; it returns the size written.
func (d *Dir) saveBase(s State) (int64, error) {
	data, err := encodeState(s)
	if err != nil {
		return 0, fmt.Errorf("state directory %s: encode: %w", d.path, err)
	}
	if err := d.writeBase(data); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// encodeState is s as a base is written: with Format and SavedAt set.
func encodeState(s State) ([]byte, error) {
	s.Format = Format
	s.SavedAt = time.Now().UTC()
	return json.Marshal(s)
}

// writeBase replaces the state file with data, atomically and durably.
func (d *Dir) writeBase(data []byte) error {
	if err := d.owned(); err != nil {
		return err
	}
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	if err := writeAtomic(d.path, StateFile, data); err != nil {
		return fmt.Errorf("state directory %s: write %s: %w", d.path, StateFile, err)
	}
	return nil
}

// loadedGen is the journal generation the last Load read (0 for none).
func (d *Dir) loadedGen() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// Load reads the directory's state for a sidecar run with --zk expectZK and
// --zk-root expectRoot. Without a file it returns ErrNoState. A file it cannot
// use (corrupt, truncated, of another format, for another --zk or --zk-root)
// is moved aside to StateFile.bad-<UTC time>, kept for inspection, and
// reported as a *BadStateError whose message says why in one line. --zk lists
// compare as sets of servers (order and spaces aside); roots compare without a
// trailing slash.
func (d *Dir) Load(expectZK, expectRoot string) (State, error) {
	if err := d.owned(); err != nil {
		return State{}, err
	}
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	path := filepath.Join(d.path, StateFile)
	data, err := d.readState(path) // private.go: no link followed, 0600
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, ErrNoState
	}
	if err != nil {
		return State{}, fmt.Errorf("state directory %s: read %s: %w", d.path, StateFile, err)
	}
	s, detail, why := decode(data, expectZK, expectRoot)
	if why == nil {
		detail, why = d.replay(&s)
	}
	if why == nil {
		d.mu.Lock()
		d.gen = s.Journal
		d.mu.Unlock()
		return s, nil
	}
	bad := &BadStateError{Path: path, Err: why, Detail: detail}
	bad.MovedTo, bad.MoveErr = d.moveAside(path)
	return State{}, bad
}

// decode parses data and checks it against the flags; why is nil for a
// usable state, else one of the sentinels, with a detail.
func decode(data []byte, expectZK, expectRoot string) (State, string, error) {
	var head struct {
		Format *int `json:"format"`
	}
	if err := decodeOne(data, &head); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return State{}, fmt.Sprintf("%d bytes end mid-record", len(data)), ErrTruncated
		}
		return State{}, err.Error(), ErrCorrupt
	}
	if head.Format == nil {
		return State{}, "no format given", ErrFormat
	}
	if !slices.Contains(formatsRead, *head.Format) {
		return State{}, fmt.Sprintf("format %d, this sidecar reads %v", *head.Format, formatsRead), ErrFormat
	}
	var s State
	if err := decodeOne(data, &s); err != nil {
		return State{}, err.Error(), ErrCorrupt
	}
	if !sameServers(s.ZK, expectZK) {
		return State{}, fmt.Sprintf("saved for %q, running with %q", s.ZK, expectZK), ErrOtherZK
	}
	if cleanRoot(s.Root) != cleanRoot(expectRoot) {
		return State{}, fmt.Sprintf("saved for %q, running with %q", s.Root, expectRoot), ErrOtherRoot
	}
	return s, "", nil
}

// decodeOne decodes exactly one JSON value from data into v.
func decodeOne(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("more after the record")
	}
	return nil
}

func sameServers(a, b string) bool {
	return slices.Equal(servers(a), servers(b))
}

func servers(list string) []string {
	var out []string
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func cleanRoot(r string) string {
	if r = strings.TrimRight(r, "/"); r == "" {
		return "/"
	}
	return r
}

// moveAside renames a bad state file to a name of its own, kept for
// inspection, and makes the rename durable.
func (d *Dir) moveAside(path string) (string, error) {
	to := path + ".bad-" + time.Now().UTC().Format("20060102T150405.000000000Z")
	if err := renameAside(path, to); err != nil { // private.go: kept 0600
		return "", err
	}
	return to, syncDir(d.path)
}

// Clear removes the state file, durably, so that the next Load reports
// ErrNoState: for a sidecar that ended its session on purpose (SIGTERM), whose
// successor has nothing to resume.
func (d *Dir) Clear() error {
	if err := d.owned(); err != nil {
		return err
	}
	d.saveMu.Lock()
	defer d.saveMu.Unlock()
	if err := os.Remove(filepath.Join(d.path, StateFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state directory %s: %w", d.path, err)
	}
	d.removeJournals(-1)
	return syncDir(d.path)
}
