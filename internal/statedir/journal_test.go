package statedir

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// leaseSource is a Source over a map the test changes.
type leaseSource struct {
	mu     sync.Mutex
	leases map[string]Lease
	sess   Session
}

func newLeaseSource() *leaseSource {
	return &leaseSource{leases: map[string]Lease{}, sess: Session{ID: 7, Password: []byte("pw"), Timeout: time.Second}}
}

func (s *leaseSource) source() Source {
	return Source{
		Session: func() Session { s.mu.Lock(); defer s.mu.Unlock(); return s.sess },
		Lease: func(id string) (Lease, bool) {
			s.mu.Lock()
			defer s.mu.Unlock()
			l, ok := s.leases[id]
			return l, ok
		},
		Hold: func(lease, kind, name string) (Hold, bool) {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, h := range s.leases[lease].Holds {
				if h.Kind == kind && h.Name == name {
					return h, true
				}
			}
			return Hold{}, false
		},
		Leases: func() []Lease {
			s.mu.Lock()
			defer s.mu.Unlock()
			out := make([]Lease, 0, len(s.leases))
			for _, l := range s.leases {
				out = append(out, l)
			}
			return out
		},
	}
}

func (s *leaseSource) put(l Lease) {
	s.mu.Lock()
	s.leases[l.ID] = l
	s.mu.Unlock()
}

func (s *leaseSource) end(id string) {
	s.mu.Lock()
	delete(s.leases, id)
	s.mu.Unlock()
}

func startJournal(t testing.TB, d *Dir, src *leaseSource, opts ...JournalOption) *Journal {
	t.Helper()
	j, err := d.Journal(src.source(), "z:2181", "/coord", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(j.Close)
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	return j
}

func leaseIDs(st State) string {
	var ids []string
	for _, l := range st.Leases {
		ids = append(ids, l.ID+"/"+fmt.Sprint(len(l.Holds)))
	}
	return strings.Join(ids, ",")
}

// What Commit returned for is on disk when it returns: after every change, a
// reader of the directory (a successor) finds the leases exactly as they are,
// ended ones gone, from concurrent writers.
func TestJournalCommitsEveryChangeBeforeItReturns(t *testing.T) {
	d := openTemp(t)
	src := newLeaseSource()
	j := startJournal(t, d, src)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				id := fmt.Sprintf("w%d-%02d", w, i)
				src.put(Lease{ID: id, TTL: time.Minute, Holds: []Hold{{Kind: "lock", Name: id, Nodes: []string{"/coord/locks/" + id + "/n"}}}})
				j.Changed(id)
				j.HoldChanged(id, "lock", id)
				if i%3 == 0 {
					src.end(id)
					j.Changed(id)
				}
				if err := j.Commit(context.Background()); err != nil {
					errs <- err
					return
				}
				st, err := Read(d.Path())
				if err != nil {
					errs <- err
					return
				}
				found := false
				for _, l := range st.Leases {
					found = found || (l.ID == id && len(l.Holds) == 1 && l.Holds[0].Name == id)
				}
				if found != (i%3 != 0) {
					errs <- fmt.Errorf("after Commit, lease %s on disk: %v", id, found)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, err := d.Load("z:2181", "/coord")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Leases) != 4*33 || st.Session.ID != 7 {
		t.Fatalf("loaded %d leases, session %d; want 132 and 7", len(st.Leases), st.Session.ID)
	}
}

// A journal line cut short by the writer's death is ignored (its write never
// returned, so nothing was acknowledged); a whole line that is no record makes
// the state unusable, moved aside like any bad state.
func TestJournalReplayIgnoresALineCutShort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	src := newLeaseSource()
	j, err := d.Journal(src.source(), "z:2181", "/coord")
	if err != nil {
		t.Fatal(err)
	}
	src.put(Lease{ID: "kept", TTL: time.Minute})
	j.Changed("kept")
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	j.Close()
	_ = d.Close()
	journals, _ := filepath.Glob(filepath.Join(path, JournalFile+"-*"))
	if len(journals) != 1 {
		t.Fatalf("journals %v, want one", journals)
	}
	f, err := os.OpenFile(journals[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"lease":{"id":"half`); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	d2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := d2.Load("z:2181", "/coord")
	_ = d2.Close()
	if err != nil || leaseIDs(st) != "kept/0" {
		t.Fatalf("Load after a line cut short: %q, %v; want the kept lease alone", leaseIDs(st), err)
	}

	if err := os.WriteFile(journals[0], []byte("{\"end\":\"kept\"}\nnot a record\n{\"end\":\"x\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d3, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	_, err = d3.Load("z:2181", "/coord")
	var bad *BadStateError
	if !errors.As(err, &bad) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("Load with a bad line: %v, want a corrupt state naming line 2", err)
	}
}

// A journal that outgrows its base is compacted: one base and one journal
// stand after it, and they read back as the state.
func TestJournalCompactsWhenItOutgrowsItsBase(t *testing.T) {
	d := openTemp(t)
	src := newLeaseSource()
	j := startJournal(t, d, src)
	src.put(Lease{ID: "a", TTL: time.Minute})
	first, _ := filepath.Glob(filepath.Join(d.Path(), JournalFile+"-*"))
	big := strings.Repeat("n", 4096)
	for i := range 1100 { // 1,100 records of 4 KiB: past journalMin
		src.put(Lease{ID: "a", TTL: time.Minute, Owner: fmt.Sprint(i), Holds: []Hold{{Kind: "kv", Name: "k", Nodes: []string{"/x/" + big}}}})
		j.Changed("a")
		j.HoldChanged("a", "kv", "k")
		if err := j.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	now, _ := filepath.Glob(filepath.Join(d.Path(), JournalFile+"-*"))
	if len(now) != 1 || len(first) != 1 || now[0] == first[0] {
		t.Fatalf("journals before %v, after %v: want one, another", first, now)
	}
	st, err := Read(d.Path())
	if err != nil || len(st.Leases) != 1 || st.Leases[0].Owner != "1099" || len(st.Leases[0].Holds) != 1 {
		t.Fatalf("after compaction: %+v, %v", st.Leases, err)
	}
}

// A symbolic link where the journal or the state file should be is refused,
// not followed.
func TestJournalRefusesSymbolicLinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	if err := os.WriteFile(elsewhere, []byte(`{"format":2,"zk":"z:2181","root":"/coord","session":{"id":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, StateFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load("z:2181", "/coord"); err == nil {
		t.Fatal("Load followed a symbolic link")
	}
	if err := os.Symlink(elsewhere, filepath.Join(dir, journalName(6))); err != nil {
		t.Fatal(err)
	}
	if f, m, err := createJournal(dir, journalName(6), 4096); err == nil {
		_ = unmap(m)
		_ = f.Close()
		t.Fatal("createJournal followed a symbolic link")
	}
}

// On a full disk (a 16 MiB tmpfs, filled) the journal's appends go on in
// the space it preallocated; once that is used up, its compaction cannot
// get the disk it needs, and a change is not acknowledged: Commit and Err
// report ErrStateUnavailable, and what was written before stays readable.
// Once there is room again the journal writes everything and Err clears.
func TestJournalOnAFullDiskRefusesAndRecovers(t *testing.T) {
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("no tmpfs to fill here (mount: %v: %s)", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	d, err := Open(filepath.Join(mnt, "state"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	src := newLeaseSource()
	j := startJournal(t, d, src)
	src.put(Lease{ID: "before", TTL: time.Minute})
	j.Changed("before")
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	_ = f.Close()
	var refused error
	acked := 0
	for i := 0; refused == nil && i < 2*journalMin/4096; i++ {
		src.put(Lease{ID: "busy", TTL: time.Minute, Owner: fmt.Sprintf("%04d%s", i, strings.Repeat("o", 4096))})
		j.Changed("busy")
		if refused = j.Commit(context.Background()); refused == nil {
			acked = i
		}
	}
	if !errors.Is(refused, ErrStateUnavailable) || !errors.Is(j.Err(), ErrStateUnavailable) {
		t.Fatalf("Commit on a full disk once the journal is full: %v, Err %v; want ErrStateUnavailable", refused, j.Err())
	}
	st, err := Read(d.Path())
	if err != nil || len(st.Leases) != 2 || !strings.HasPrefix(st.Leases[1].Owner, fmt.Sprintf("%04d", acked)) {
		t.Fatalf("what was acknowledged before (up to %d): %v, %v", acked, st.Leases, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "the journal written again", func() bool { return j.Err() == nil })
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err = Read(d.Path())
	if err != nil || len(st.Leases) != 2 || !strings.HasPrefix(st.Leases[1].Owner, fmt.Sprintf("%04d", acked+1)) {
		t.Fatalf("after the disk has room: %v, %v; want the refused change written", st.Leases, err)
	}
}

// One lease with many holds costs each change one line, not the lease's
// every hold: a grant and a release among 2,000 holds append a line each,
// and the replay keeps the others.
func TestJournalRecordsAHoldNotItsLease(t *testing.T) {
	d := openTemp(t)
	src := newLeaseSource()
	j := startJournal(t, d, src)
	l := Lease{ID: "big", TTL: time.Minute}
	src.put(l)
	j.Changed("big")
	for i := range 2000 {
		l.Holds = append(l.Holds, Hold{Kind: "lock", Name: fmt.Sprintf("l%04d", i), Nodes: []string{fmt.Sprintf("/coord/locks/l%04d/n", i)}})
		src.put(Lease{ID: l.ID, TTL: l.TTL, Holds: append([]Hold(nil), l.Holds...)})
		j.HoldChanged("big", "lock", fmt.Sprintf("l%04d", i))
	}
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	journals, _ := filepath.Glob(filepath.Join(d.Path(), JournalFile+"-*"))
	before := writtenBytes(t, journals[0])
	l.Holds = l.Holds[1:] // l0000 let go
	src.put(Lease{ID: l.ID, TTL: l.TTL, Holds: append([]Hold(nil), l.Holds...)})
	j.HoldChanged("big", "lock", "l0000")
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if grew := writtenBytes(t, journals[0]) - before; grew > 200 {
		t.Fatalf("a release among 2,000 holds appended %d bytes, want one short line", grew)
	}
	st, err := Read(d.Path())
	if err != nil || len(st.Leases) != 1 || len(st.Leases[0].Holds) != 1999 || st.Leases[0].Holds[0].Name != "l0001" {
		t.Fatalf("replayed: %v leases, %v", len(st.Leases), err)
	}
}

// writtenBytes is how much of a journal holds records (the rest of it is
// preallocated zeros).
func writtenBytes(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return i
	}
	return len(b)
}

// A fault on the journal's mapping (here: the file made immutable, which the
// kernel answers with SIGBUS on the next store) is a write error, never the
// process's end: Commit reports ErrStateUnavailable, and once the file can be
// written again the journal compacts and goes on.
func TestJournalFaultOnItsMappingIsAnError(t *testing.T) {
	d := openTemp(t)
	src := newLeaseSource()
	j := startJournal(t, d, src)
	journals, _ := filepath.Glob(filepath.Join(d.Path(), JournalFile+"-*"))
	if out, err := exec.Command("chattr", "+i", journals[0], d.Path()).CombinedOutput(); err != nil {
		t.Skipf("chattr +i: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-i", journals[0], d.Path()).Run() })
	src.put(Lease{ID: "faulted", TTL: time.Minute})
	j.Changed("faulted")
	err := j.Commit(context.Background())
	if !errors.Is(err, ErrStateUnavailable) {
		t.Fatalf("Commit on an immutable journal: %v, want ErrStateUnavailable", err)
	}
	if out, err := exec.Command("chattr", "-i", journals[0], d.Path()).CombinedOutput(); err != nil {
		t.Fatalf("chattr -i: %v: %s", err, out)
	}
	testutil.Eventually(t, 30*time.Second, "the journal written again", func() bool { return j.Err() == nil })
	if st, err := Read(d.Path()); err != nil || leaseIDs(st) != "faulted/0" {
		t.Fatalf("after the fault: %q, %v", leaseIDs(st), err)
	}
}

// A hold let go with its lease in one write costs only the lease's end, and
// the replay knows neither; a hold let go while its lease lives is dropped.
func TestJournalHoldEndedWithItsLeaseIsOneLine(t *testing.T) {
	d := openTemp(t)
	src := newLeaseSource()
	j := startJournal(t, d, src)
	hold := Hold{Kind: "lock", Name: "a", Nodes: []string{"/coord/locks/a/n"}}
	for _, id := range []string{"gone", "kept"} {
		src.put(Lease{ID: id, TTL: time.Minute, Holds: []Hold{hold}})
		j.Changed(id)
		j.HoldChanged(id, "lock", "a")
	}
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	journals, _ := filepath.Glob(filepath.Join(d.Path(), JournalFile+"-*"))
	before := writtenBytes(t, journals[0])
	src.end("gone")
	j.HoldChanged("gone", "lock", "a")
	j.Changed("gone")
	src.put(Lease{ID: "kept", TTL: time.Minute})
	j.HoldChanged("kept", "lock", "a")
	if err := j.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(journals[0])
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b[before:writtenBytes(t, journals[0])]), "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"drop"`) || !strings.Contains(lines[1], `"end":"gone"`) {
		t.Fatalf("the write appended %q, want the kept lease's drop and the other's end", lines)
	}
	st, err := Read(d.Path())
	if err != nil || leaseIDs(st) != "kept/0" {
		t.Fatalf("replayed %q, %v; want kept/0", leaseIDs(st), err)
	}
}
