package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Fair shares between tenants (issue 24): one token cannot take the global
// caps on leases, streams and long-polls from the others, and /v1/events ids
// show nothing of what a token may not read.

const (
	tokTenantA = "tenant-a-token-0123456789"
	tokTenantB = "tenant-b-token-0123456789"
	tokViewer  = "viewer-token-0123456789"
)

// tenantsJSON is a tokens file of two tenants and a read-only viewer; bFields
// are more fields of tenant b's entry.
func tenantsJSON(bFields string) string {
	return `{"tokens":[
 {"name":"a","token":"` + tokTenantA + `","allow":["locks/a-*","kv/a-*"]},
 {"name":"b","token":"` + tokTenantB + `","allow":["locks/b-*","kv/b-*"]` + bFields + `},
 {"name":"viewer","token":"` + tokViewer + `","allow":["*"],"readOnly":true}
]}`
}

// With --max-leases 20, --max-streams 3 and --max-waiters 3, tenant b takes
// all it can of each: past its share (by default each cap divided by the 3
// tokens, at least 1; or its own maxLeases, maxStreams, maxWaiters) it gets the very problem of the
// global cap, saying it is the token's own; tenant a still gets a lease, a
// stream and a long-poll. A read-only token cannot use up streams or
// long-polls for the others either. What a token gives back it can take again.
func TestTenantCannotStarveAnother(t *testing.T) {
	zkc := zktest.Shared(t)
	for _, c := range []struct {
		name                            string
		bFields                         string
		leases, streams, waiters, other int // b's shares; other: the viewer's streams and long-polls
	}{
		{"default shares", "", 6, 1, 1, 1},
		{"own caps", `,"maxLeases":4,"maxStreams":2,"maxWaiters":2`, 4, 2, 2, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "tokens.json")
			writeTokens(t, file, tenantsJSON(c.bFields))
			car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--tokens-file", file,
				"--max-leases", "20", "--max-streams", "3", "--max-waiters", "3")
			a, b, viewer := car.As(sidecartest.Bearer(tokTenantA)...), car.As(sidecartest.Bearer(tokTenantB)...), car.As(sidecartest.Bearer(tokViewer)...)

			// Streams: b and the viewer open as many as the global cap allows.
			bStreams := takeStreams(t, b, 3, c.streams)
			if c.other > 0 {
				takeStreams(t, viewer, 3, c.other)
			}
			a.OpenStream(t, "/v1/session/events").Next(t, 5*time.Second)
			bStreams[0]()
			testutil.Eventually(t, 10*time.Second, "b's stream slot back", func() bool {
				return streamOpens(t, b, "/v1/session/events")
			})

			// Long-polls: lock waiters for b, key watches for the viewer.
			b.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/b-held")
			takeLongPolls(t, b, 3, c.waiters, "POST", "/v1/locks/b-held?wait=60s",
				func() int {
					return int(sidecartest.Num(b.Must(t, http.StatusOK, "GET", "/v1/locks/b-held").Body["waiters"]))
				})
			if c.other > 0 {
				takeLongPolls(t, viewer, 3, c.other, "GET", "/v1/kv/viewer-watch?version=-1&wait=60s", nil)
			}
			a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/a-held")
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			go func() { _, _ = a.Do(ctx, http.MethodPost, "/v1/locks/a-held?wait=60s", nil) }()
			testutil.Eventually(t, 10*time.Second, "a's long-poll waits", func() bool {
				return sidecartest.Num(a.Must(t, http.StatusOK, "GET", "/v1/locks/a-held").Body["waiters"]) == 1
			})

			// Leases: b makes leases until refused, then holds its share (the
			// holder's and waiters' implicit leases included).
			var refused *sidecartest.Response
			var made []string
			for range 20 {
				r := try(t, b, http.MethodPost, "/v1/leases?ttl=60s")
				if r.Status != http.StatusCreated {
					refused = r
					break
				}
				made = append(made, sidecartest.Str(r.Body["lease"]))
			}
			if refused == nil {
				t.Fatalf("b made 20 leases, its share is %d", c.leases)
			}
			ownCapProblem(t, refused, http.StatusTooManyRequests, "too-many-leases", "maxLeases")
			if n := sidecartest.Num(b.Must(t, http.StatusOK, "GET", "/v1/session").Body["leases"]); n != int64(c.leases) {
				t.Fatalf("b holds %d leases, its share is %d", n, c.leases)
			}
			ownCapProblem(t, try(t, b, http.MethodPost, "/v1/locks/b-other"), http.StatusTooManyRequests, "too-many-leases", "maxLeases")
			la := sidecartest.Str(a.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s").Body["lease"])
			a.Must(t, http.StatusCreated, "POST", "/v1/locks/a-other")
			a.Must(t, http.StatusNoContent, "DELETE", "/v1/leases/"+la)
			if len(made) > 0 {
				b.Must(t, http.StatusNoContent, "DELETE", "/v1/leases/"+made[0])
				b.Must(t, http.StatusCreated, "POST", "/v1/leases?ttl=60s")
			}
		})
	}
}

// try sends a bodiless request and returns its answer, whatever its status.
func try(t *testing.T, s *sidecartest.Sidecar, method, path string) *sidecartest.Response {
	t.Helper()
	r, err := s.Do(context.Background(), method, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ownCapProblem checks that r is the problem name with status, as past the
// global cap (Retry-After included), with a detail naming the token's own cap.
func ownCapProblem(t *testing.T, r *sidecartest.Response, status int, name, field string) {
	t.Helper()
	sidecartest.ProblemIs(t, r, status, name)
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %s without Retry-After: %v", status, name, r.Header)
	}
	if d := sidecartest.Str(r.Body["detail"]); !strings.Contains(d, "its own cap") || !strings.Contains(d, field) {
		t.Fatalf("detail %q does not say it is the token's own cap (%s)", d, field)
	}
}

// openStreamOf opens a stream of s; it answers a close function for a stream
// served (200), or the refusal.
func openStreamOf(t *testing.T, s *sidecartest.Sidecar, path string) (func(), *sidecartest.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.Base+path, nil)
	sidecartest.SetHeaders(req, s.Hdr)
	resp, err := s.HC().Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK {
		closed := false
		stop := func() {
			if !closed {
				closed = true
				cancel()
				resp.Body.Close()
			}
		}
		t.Cleanup(stop)
		return stop, nil
	}
	defer cancel()
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := &sidecartest.Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if err := json.Unmarshal(raw, &r.Body); err != nil {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
	}
	return nil, r
}

// streamOpens tells whether s may open a stream of path now (and closes it).
func streamOpens(t *testing.T, s *sidecartest.Sidecar, path string) bool {
	t.Helper()
	stop, _ := openStreamOf(t, s, path)
	if stop != nil {
		stop()
	}
	return stop != nil
}

// takeStreams opens tries streams under s: want are served (their close
// functions are answered), the others refused past the token's own cap.
func takeStreams(t *testing.T, s *sidecartest.Sidecar, tries, want int) []func() {
	t.Helper()
	var open []func()
	for range tries {
		stop, refused := openStreamOf(t, s, "/v1/session/events")
		if stop != nil {
			open = append(open, stop)
			continue
		}
		ownCapProblem(t, refused, http.StatusServiceUnavailable, "too-many-streams", "maxStreams")
	}
	if len(open) != want {
		t.Fatalf("%d streams open, the token's share is %d", len(open), want)
	}
	return open
}

// takeLongPolls sends tries long-polls at once under s: all but want are
// refused past the token's own cap, the others wait (waiting, if given,
// counts them) until the test ends.
func takeLongPolls(t *testing.T, s *sidecartest.Sidecar, tries, want int, method, path string, waiting func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	answers := make(chan *sidecartest.Response, tries)
	for range tries {
		go func() {
			r, err := s.Do(ctx, method, path, nil)
			if err != nil {
				r = &sidecartest.Response{}
			}
			answers <- r
		}()
	}
	for range tries - want {
		select {
		case r := <-answers:
			ownCapProblem(t, r, http.StatusServiceUnavailable, "too-many-long-polls", "maxWaiters")
		case <-time.After(testutil.Patience(10 * time.Second)):
			t.Fatalf("%d long-polls, the token's share is %d: not all the others were refused", tries, want)
		}
	}
	if waiting != nil {
		testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d long-polls waiting", want), func() bool { return waiting() == want })
	}
}

// /v1/events ids are the stream's own: a token scoped to locks/a-* sees
// consecutive ids although another tenant's locks change between its events,
// and a stream reopened with Last-Event-ID N goes on from N + 1 (one with an id
// that is not decimal starts at 1).
func TestEventIDsShowNothingOfOtherTenants(t *testing.T) {
	zkc := zktest.Shared(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.json")
	writeTokens(t, file, tenantsJSON(""))
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--tokens-file", file)
	a, b, viewer := car.As(sidecartest.Bearer(tokTenantA)...), car.As(sidecartest.Bearer(tokTenantB)...), car.As(sidecartest.Bearer(tokViewer)...)

	all := viewer.OpenStream(t, "/v1/events")
	st := a.OpenStream(t, "/v1/events")
	var ids []int64
	until := func(st *sidecartest.Stream, ids *[]int64, lock string, held bool) {
		t.Helper()
		deadline := time.Now().Add(testutil.Patience(20 * time.Second))
		for time.Now().Before(deadline) {
			ev := st.Recv(t, time.Until(deadline))
			if ids != nil {
				*ids = append(*ids, sidecartest.MustInt(t, ev.ID))
			}
			if ev.Name == "lock" && sidecartest.Str(ev.Data["name"]) == lock && (ev.Data["holder"] != nil) == held {
				return
			}
		}
		t.Fatalf("no event of lock %s (held %v)", lock, held)
	}
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/a-1?ttl=60s")
	until(st, &ids, "a-1", true)
	until(all, nil, "a-1", true)
	// b's locks change between a's events: the viewer sees them published.
	b.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/b-1?ttl=60s")
	until(all, nil, "b-1", true)
	b.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/b-2?ttl=60s")
	until(all, nil, "b-2", true)
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/a-2?ttl=60s")
	until(st, &ids, "a-2", true)
	consecutive(t, "a's stream", ids, 1)

	// Reconnect with the last id: the current state again, numbered on.
	st.Cancel()
	last := ids[len(ids)-1]
	again := a.OpenStream(t, "/v1/events", "Last-Event-ID", strconv.FormatInt(last, 10))
	var resumed []int64
	until(again, &resumed, "a-2", true)
	b.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/b-3?ttl=60s")
	until(all, nil, "b-3", true)
	a.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/a-3?ttl=60s")
	until(again, &resumed, "a-3", true)
	consecutive(t, "the reconnected stream", resumed, last+1)

	fresh := a.OpenStream(t, "/v1/events", "Last-Event-ID", "not-a-number")
	if id := sidecartest.MustInt(t, fresh.Next(t, 10*time.Second).ID); id != 1 {
		t.Fatalf("a stream with a Last-Event-ID that is not decimal starts at %d, want 1", id)
	}
}

// consecutive checks that ids are from, from+1, from+2, ...
func consecutive(t *testing.T, what string, ids []int64, from int64) {
	t.Helper()
	for i, id := range ids {
		if id != from+int64(i) {
			t.Fatalf("%s: ids %v, want consecutive from %d", what, ids, from)
		}
	}
	if !slices.IsSorted(ids) {
		t.Fatalf("%s: ids %v", what, ids)
	}
}
