package statedir

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

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
	data, err := readJournal(filepath.Join(d.path, name))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	if end := bytes.IndexByte(data, 0); end >= 0 {
		data = data[:end] // the preallocated rest, never written
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

// Read reads the state in dir as Load would return it (the base with its
// journal replayed), without owning the directory and without checking or
// moving anything: for inspection while a sidecar runs on it. ErrNoState
// when there is none.
func Read(dir string) (State, error) {
	d := &Dir{path: dir}
	data, err := readJournal(filepath.Join(dir, StateFile))
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

// readJournal reads a file of the directory, never through a link, changing
// nothing.
func readJournal(path string) ([]byte, error) {
	data, _, err := readPrivate(path, false)
	return data, err
}
