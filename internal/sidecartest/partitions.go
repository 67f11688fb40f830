package sidecartest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// PMember is a partition member's body.
type PMember struct {
	Group    string   `json:"group"`
	ID       string   `json:"id"`
	Assigned []string `json:"assigned"`
	Owned    []struct {
		Partition    string `json:"partition"`
		FencingToken int64  `json:"fencingToken"`
	} `json:"owned"`
	Version int64  `json:"version"`
	Lease   string `json:"lease"`
}

func (m PMember) OwnedTokens() map[string]int64 {
	out := map[string]int64{}
	for _, o := range m.Owned {
		out[o.Partition] = o.FencingToken
	}
	return out
}

// PGroup is a partition group's body.
type PGroup struct {
	Version    int64    `json:"version"`
	Leader     *string  `json:"leader"`
	Partitions []string `json:"partitions"`
	Members    []struct {
		ID       string   `json:"id"`
		Assigned []string `json:"assigned"`
		Owned    []string `json:"owned"`
	} `json:"members"`
	Moving []struct {
		Partition string  `json:"partition"`
		Owner     *string `json:"owner"`
	} `json:"moving"`
}

func DecodeAs[T any](t testing.TB, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return v
}

// Settled tells whether every partition is Owned by the member the plan deals it to.
func (g PGroup) Settled(members int) bool {
	if len(g.Members) != members || len(g.Moving) != 0 {
		return false
	}
	n := 0
	for _, m := range g.Members {
		if !slices.Equal(m.Assigned, m.Owned) {
			return false
		}
		n += len(m.Owned)
	}
	return n == len(g.Partitions)
}

func AwaitSettled(t testing.TB, car *Sidecar, group string, members int, within time.Duration) PGroup {
	t.Helper()
	var g PGroup
	testutil.Eventually(t, within, fmt.Sprintf("group %s Settled with %d members", group, members), func() bool {
		r, err := car.Do(context.Background(), http.MethodGet, "/v1/partitions/"+group, nil)
		if err != nil || r.Status != http.StatusOK {
			return false
		}
		g = DecodeAs[PGroup](t, r.Raw)
		return g.Settled(members)
	})
	return g
}
