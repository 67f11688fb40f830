package statedir

import (
	"encoding/json"
	"testing"
	"time"
)

// The records appended by hand are the bytes encoding/json writes for them,
// and read back as they were, for plain values and for values it escapes.
func TestRecordsAreWhatEncodingJSONWrites(t *testing.T) {
	at := time.Date(2026, 11, 28, 2, 41, 8, 123456789, time.UTC)
	local := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	odd := "a\"b\\c\n\t\x01<é>\u2028\xff"
	records := []record{
		{Lease: &Lease{ID: "abc", TTL: 30 * time.Second, ExpiresAt: at}},
		{Lease: &Lease{ID: "abc", TTL: time.Minute, ExpiresAt: local, Owner: "tenant-1", Implicit: true, Pinned: true}},
		{Lease: &Lease{ID: odd, TTL: 1, ExpiresAt: at, Owner: odd, StreamBound: true}},
		{Lease: &Lease{ID: "w", ExpiresAt: at, Waiting: []Pending{{Kind: "lock", Name: "n", Parent: "/p", GUID: "g"}}}},
		{Hold: &leaseHold{"abc", Hold{Kind: "lock", Name: "x", Nodes: []string{"/coord/locks/x/_c_1-lock-0000000001"}}}},
		{Hold: &leaseHold{"abc", Hold{Kind: "semaphore", Name: "s", Nodes: []string{"/a", "/b"}}}},
		{Hold: &leaseHold{"abc", Hold{Kind: "claim", Name: "q", Nodes: []string{"/q"}, Data: json.RawMessage(`{"claim":"c"}`)}}},
		{Drop: &leaseHold{"abc", Hold{Kind: "lock", Name: "x"}}},
		{Drop: &leaseHold{"a\tb", Hold{Kind: "lock", Name: odd}}},
		{End: "abc"},
		{End: odd},
		{Session: &Session{ID: 72057843469058048, Password: []byte("pw"), Timeout: 10 * time.Second, LastZxid: 3}},
	}
	for _, r := range records {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendRecord(nil, r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want)+"\n" {
			t.Errorf("appendRecord:\n got %s\nwant %s", got, want)
		}
	}
}
