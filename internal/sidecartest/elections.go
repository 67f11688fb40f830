package sidecartest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Campaign enrols a candidate and returns the answer.
func Campaign(t testing.TB, car *Sidecar, election, id, query string) *Response {
	t.Helper()
	r, err := car.Do(context.Background(), http.MethodPost,
		fmt.Sprintf("/v1/elections/%s/candidates?id=%s&%s", election, id, query), strings.NewReader(`{"value":"`+id+`-value"}`), "Content-Type", "application/json")
	if err != nil || r.Status != http.StatusCreated {
		t.Fatalf("campaign %s: %v %+v", id, err, r)
	}
	return r
}

// LeaderFollower reads `leader` events of one stream and checks that terms never
// go backwards.
type LeaderFollower struct {
	St       *Stream
	lastTerm int64
	lastID   int64 // event ids strictly increase, and are at least the term
}

// CheckID fails unless ev's id follows the last one (and, with a leader, is at
// least its term), and records it.
func (f *LeaderFollower) CheckID(t *testing.T, ev Event) {
	t.Helper()
	id := MustInt(t, ev.ID)
	if id <= f.lastID {
		t.Fatalf("election event id %d after %d: %+v", id, f.lastID, ev)
	}
	if leader, _ := ev.Data["leader"].(map[string]any); leader != nil && id < Num(leader["term"]) {
		t.Fatalf("election event id %d below its term: %+v", id, ev)
	}
	f.lastID = id
}

// Await reads events until `candidate` leads with a term above `above`.
func (f *LeaderFollower) Await(t *testing.T, candidate string, above int64, within time.Duration) int64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ev := f.St.Next(t, time.Until(deadline))
		if ev.Name != "leader" {
			t.Fatalf("unexpected event %+v", ev)
		}
		f.CheckID(t, ev)
		leader, _ := ev.Data["leader"].(map[string]any)
		if leader == nil {
			continue
		}
		term := Num(leader["term"])
		if term < f.lastTerm {
			t.Fatalf("term went backwards: %d after %d", term, f.lastTerm)
		}
		f.lastTerm = term
		if Str(leader["candidate"]) == candidate && term > above {
			return term
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never led with a term above %d", candidate, above)
		}
	}
}
