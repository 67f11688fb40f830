package statedir

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sample() State {
	exp := time.Date(2026, 11, 25, 20, 0, 0, 123456789, time.UTC)
	return State{
		ZK:   "zk1:2181,zk2:2181,zk3:2181",
		Root: "/coord",
		Session: Session{
			ID: 0x1000a2b3c4d5e6f, Password: []byte{0, 1, 2, 250, 251, 252, 253, 254, 255, 9, 8, 7, 6, 5, 4, 3},
			Timeout: 10 * time.Second, LastZxid: 0x300000042,
		},
		Leases: []Lease{{
			ID: "abcdefghij0123456789", TTL: 30 * time.Second, ExpiresAt: exp, Owner: "app",
			Holds: []Hold{
				{Kind: "lock", Name: "jobs", Nodes: []string{"/coord/locks/jobs/_c_5d1e-lock-0000000007"}},
				{Kind: "queue", Name: "work", Nodes: []string{"/coord/queues/work/claims/x"}, Data: json.RawMessage(`{"claim":"c1"}`)},
			},
			Waiting: []Pending{{Kind: "semaphore", Name: "pool", Parent: "/coord/semaphores/pool/leases", GUID: "9f8e7d6c-0000-4000-8000-000000000001"}},
		}, {
			ID: "zyxwvutsrq9876543210", TTL: 5 * time.Second, ExpiresAt: exp.Add(time.Second), Implicit: true, StreamBound: true,
		}},
	}
}

func TestSaveThenLoadGivesTheStateBack(t *testing.T) {
	d := openTemp(t)
	want := sample()
	if err := d.Save(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.Load(want.ZK, want.Root)
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != Format || got.SavedAt.IsZero() {
		t.Errorf("format %d, savedAt %v: want %d and a time", got.Format, got.SavedAt, Format)
	}
	want.Format, want.SavedAt = got.Format, got.SavedAt
	if !reflect.DeepEqual(got, want) {
		t.Errorf("loaded\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoadWithoutAFileReportsNoState(t *testing.T) {
	d := openTemp(t)
	if _, err := d.Load("z:2181", "/coord"); !errors.Is(err, ErrNoState) {
		t.Fatalf("got %v, want ErrNoState", err)
	}
	var bad *BadStateError
	if errors.As(ErrNoState, &bad) {
		t.Fatal("a missing file is not a bad one")
	}
}

func TestTheServerListComparesAsASetAndTheRootWithoutATrailingSlash(t *testing.T) {
	d := openTemp(t)
	if err := d.Save(State{ZK: "a:2181,b:2181", Root: "/coord"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(" b:2181, a:2181 ", "/coord/"); err != nil {
		t.Fatal(err)
	}
}

// encoded is sample() as Save writes it, changed by f.
func encoded(t *testing.T, f func(map[string]any)) []byte {
	t.Helper()
	b, err := json.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["format"] = Format
	f(m)
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestABadStateFileIsReportedAndMovedAside(t *testing.T) {
	good := encoded(t, func(map[string]any) {})
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"corrupt bytes", []byte("\x00\xff\xfe not json at all"), ErrCorrupt},
		{"truncated mid-record", good[:len(good)/2], ErrTruncated},
		{"empty", nil, ErrTruncated},
		{"wrong types", encoded(t, func(m map[string]any) { m["leases"] = "none" }), ErrCorrupt},
		{"format 3", encoded(t, func(m map[string]any) { m["format"] = 3 }), ErrFormat},
		{"no format", encoded(t, func(m map[string]any) { delete(m, "format") }), ErrFormat},
		{"another zk", encoded(t, func(m map[string]any) { m["zk"] = "other:2181" }), ErrOtherZK},
		{"another root", encoded(t, func(m map[string]any) { m["root"] = "/elsewhere" }), ErrOtherRoot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := openTemp(t)
			path := filepath.Join(d.Path(), StateFile)
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			s := sample()
			_, err := d.Load(s.ZK, s.Root)
			var bad *BadStateError
			if !errors.Is(err, tc.want) || !errors.As(err, &bad) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if tc.want == ErrCorrupt && errors.Is(err, ErrTruncated) {
				t.Fatalf("got %v: a whole file is not truncated", err)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tc.want.Error()) {
				t.Errorf("message %q: want one line that says why", msg)
			}
			kept, err := os.ReadFile(bad.MovedTo)
			if err != nil || string(kept) != string(tc.data) {
				t.Errorf("file moved aside to %q: %q, %v; want it kept as it was", bad.MovedTo, kept, err)
			}
			if !strings.HasPrefix(filepath.Base(bad.MovedTo), StateFile+".bad-") {
				t.Errorf("moved aside to %q", bad.MovedTo)
			}
			if _, err := d.Load(s.ZK, s.Root); !errors.Is(err, ErrNoState) {
				t.Errorf("next Load: %v, want ErrNoState", err)
			}
		})
	}
}

func TestAWriteCutShortLeavesThePreviousStateStanding(t *testing.T) {
	d := openTemp(t)
	want := sample()
	if err := d.Save(want); err != nil {
		t.Fatal(err)
	}
	// What a crash in the middle of the next Save leaves: half a temporary file.
	half := encoded(t, func(m map[string]any) { m["root"] = "/next" })
	half = half[:len(half)/2]
	tmp := filepath.Join(d.Path(), StateFile+tmpMark+"1234567")
	if err := os.WriteFile(tmp, half, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := d.Load(want.ZK, want.Root)
	if err != nil {
		t.Fatal(err)
	}
	if got.Root != want.Root || got.Session.ID != want.Session.ID {
		t.Fatalf("loaded %+v, want the previous state", got)
	}

	// The next owner removes the leftover.
	_ = d.Close()
	again, err := Open(d.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("leftover after Open: %v, want removed", err)
	}
	if _, err := again.Load(want.ZK, want.Root); err != nil {
		t.Fatal(err)
	}
}

func TestClearLeavesNoState(t *testing.T) {
	d := openTemp(t)
	if err := d.Save(sample()); err != nil {
		t.Fatal(err)
	}
	if err := d.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Load(sample().ZK, sample().Root); !errors.Is(err, ErrNoState) {
		t.Fatalf("got %v, want ErrNoState", err)
	}
}
