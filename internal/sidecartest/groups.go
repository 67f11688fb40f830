package sidecartest

import (
	"strings"
	"testing"
	"time"
)

// GroupSummary is "id=value id=value" of a group body, in the order given.
func GroupSummary(body map[string]any) string {
	ms, _ := body["members"].([]any)
	var parts []string
	for _, m := range ms {
		mm, _ := m.(map[string]any)
		parts = append(parts, Str(mm["id"])+"="+Str(mm["value"]))
	}
	return strings.Join(parts, " ")
}

// AwaitGroup reads a group stream until a state whose summary is want; the
// event ids and versions strictly increase on the way.
func AwaitGroup(t testing.TB, st *Stream, last *int64, want string, within time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := st.Next(t, time.Until(deadline))
		if ev.Name != "group" {
			t.Fatalf("unexpected event %+v", ev)
		}
		id := MustInt(t, ev.ID)
		if id <= *last {
			t.Fatalf("group event id %d after %d", id, *last)
		}
		*last = id
		if GroupSummary(ev.Data) == want {
			return ev.Data
		}
	}
}
