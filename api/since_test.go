package api_test

// `since` is when a hold began: a lock holder's (semaphore permit's, writer's,
// reader's) when it was granted, a leader's when it began to lead, not when its
// node was made. A waiter granted after the holder lets go some time later
// shows a since no earlier than that release, in a one-off GET, in an event
// stream, and on another sidecar that saw it waiting.

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// sinceCase is one kind of hold: how to take the first hold, how to queue a
// waiter (answering once granted), how to release the first, and where the
// waiter's since shows in the GET body.
type sinceCase struct {
	name    string
	get     string
	hold    func(t *testing.T, car *sidecartest.Sidecar) (release string)
	waiter  string // POST path of the waiter (granted within its wait)
	waiting func(body map[string]any) bool
	since   func(body map[string]any) (string, bool)
}

func sinceCases() []sinceCase {
	lease := func(t *testing.T, car *sidecartest.Sidecar, path string) map[string]any {
		return car.Must(t, http.StatusCreated, http.MethodPost, path).Body
	}
	num := func(v any) int64 { return sidecartest.Num(v) }
	first := func(v any) map[string]any {
		l, _ := v.([]any)
		if len(l) == 0 {
			return nil
		}
		m, _ := l[0].(map[string]any)
		return m
	}
	str := func(m map[string]any, k string) (string, bool) {
		if m == nil {
			return "", false
		}
		s, ok := m[k].(string)
		return s, ok
	}
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	return []sinceCase{{
		name: "lock", get: "/v1/locks/since-lock",
		hold: func(t *testing.T, car *sidecartest.Sidecar) string {
			b := lease(t, car, "/v1/locks/since-lock?owner=a")
			return "/v1/locks/since-lock?lease=" + sidecartest.Str(b["lease"])
		},
		waiter:  "/v1/locks/since-lock?owner=b&wait=60s",
		waiting: func(b map[string]any) bool { return num(b["waiters"]) == 1 },
		since: func(b map[string]any) (string, bool) {
			h := obj(b["holder"])
			if o, _ := str(h, "owner"); o != "b" {
				return "", false
			}
			return str(h, "since")
		},
	}, {
		name: "semaphore", get: "/v1/semaphores/since-sem",
		hold: func(t *testing.T, car *sidecartest.Sidecar) string {
			b := lease(t, car, "/v1/semaphores/since-sem/permits?max=1&owner=a")
			return "/v1/semaphores/since-sem/permits/" + url.PathEscape(sidecartest.Str(b["permit"])) + "?lease=" + sidecartest.Str(b["lease"])
		},
		waiter:  "/v1/semaphores/since-sem/permits?max=1&owner=b&wait=60s",
		waiting: func(b map[string]any) bool { return num(b["waiters"]) == 1 },
		since: func(b map[string]any) (string, bool) {
			h := first(b["holders"])
			if o, _ := str(h, "owner"); o != "b" {
				return "", false
			}
			return str(h, "since")
		},
	}, {
		name: "rwlock reader", get: "/v1/rwlocks/since-rw",
		hold: func(t *testing.T, car *sidecartest.Sidecar) string {
			b := lease(t, car, "/v1/rwlocks/since-rw?mode=write&owner=a")
			return "/v1/rwlocks/since-rw?mode=write&lease=" + sidecartest.Str(b["lease"])
		},
		waiter:  "/v1/rwlocks/since-rw?mode=read&owner=b&wait=60s",
		waiting: func(b map[string]any) bool { return num(b["waiters"]) == 1 },
		since: func(b map[string]any) (string, bool) {
			r := first(b["readers"])
			if o, _ := str(r, "owner"); o != "b" {
				return "", false
			}
			return str(r, "since")
		},
	}, {
		name: "rwlock writer", get: "/v1/rwlocks/since-rww",
		hold: func(t *testing.T, car *sidecartest.Sidecar) string {
			b := lease(t, car, "/v1/rwlocks/since-rww?mode=read&owner=a")
			return "/v1/rwlocks/since-rww?mode=read&lease=" + sidecartest.Str(b["lease"])
		},
		waiter:  "/v1/rwlocks/since-rww?mode=write&owner=b&wait=60s",
		waiting: func(b map[string]any) bool { return num(b["waiters"]) == 1 },
		since: func(b map[string]any) (string, bool) {
			w := obj(b["writer"])
			if o, _ := str(w, "owner"); o != "b" {
				return "", false
			}
			return str(w, "since")
		},
	}, {
		name: "election", get: "/v1/elections/since-el",
		hold: func(t *testing.T, car *sidecartest.Sidecar) string {
			b := lease(t, car, "/v1/elections/since-el/candidates?id=a")
			return "/v1/elections/since-el/candidates/a?lease=" + sidecartest.Str(b["lease"])
		},
		// Enrolled, not waiting in the request: it leads once a resigns.
		waiter:  "/v1/elections/since-el/candidates?id=b",
		waiting: func(b map[string]any) bool { l, _ := b["candidates"].([]any); return len(l) == 2 },
		since: func(b map[string]any) (string, bool) {
			l := obj(b["leader"])
			if c, _ := str(l, "candidate"); c != "b" {
				return "", false
			}
			return str(l, "since")
		},
	}}
}

func TestSinceIsWhenGranted(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	car := sidecartest.Start(t, zkc.Servers(), root)
	other := sidecartest.Start(t, zkc.Servers(), root) // sees the same holds from outside
	for _, c := range sinceCases() {
		t.Run(c.name, func(t *testing.T) {
			release := c.hold(t, car)
			stream := car.OpenStream(t, "/v1/events")
			defer stream.Cancel()
			granted := make(chan *sidecartest.Response, 1)
			go func() {
				r, err := car.Do(context.Background(), http.MethodPost, c.waiter, nil)
				if err != nil {
					r = &sidecartest.Response{Raw: []byte(err.Error())}
				}
				granted <- r
			}()
			for _, s := range []*sidecartest.Sidecar{car, other} {
				testutil.Eventually(t, 30*time.Second, c.name+" waiter queued", func() bool {
					return c.waiting(s.Must(t, http.StatusOK, http.MethodGet, c.get).Body)
				})
			}
			// Well after the waiter's node was made (ZooKeeper's ctime has
			// millisecond grain): release, noting the time first.
			time.Sleep(1500 * time.Millisecond)
			released := time.Now().Truncate(time.Millisecond)
			car.Must(t, http.StatusNoContent, http.MethodDelete, release)
			r := <-granted
			if r.Status != http.StatusCreated {
				t.Fatalf("waiter: %d %s", r.Status, r.Raw)
			}
			check := func(where, since string) {
				t.Helper()
				at, err := time.Parse(time.RFC3339Nano, since)
				if err != nil {
					t.Fatalf("%s: since %q: %v", where, since, err)
				}
				if at.Before(released) {
					t.Errorf("%s: since %s is before the release at %s: the time it queued, not when it was granted",
						where, at.Format(time.RFC3339Nano), released.Format(time.RFC3339Nano))
				}
			}
			if at := sidecartest.Str(r.Body["acquiredAt"]); at != "" {
				check("acquiredAt", at)
			}
			for _, s := range []struct {
				name string
				car  *sidecartest.Sidecar
			}{{"GET", car}, {"GET on another sidecar", other}} {
				var since string
				testutil.Eventually(t, 30*time.Second, c.name+" granted to b", func() bool {
					var ok bool
					since, ok = c.since(s.car.Must(t, http.StatusOK, http.MethodGet, c.get).Body)
					return ok
				})
				check(s.name, since)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				ev := stream.Next(t, time.Until(deadline))
				if ev.Data["name"] != path.Base(c.get) {
					continue
				}
				if since, ok := c.since(ev.Data); ok {
					check("event", since)
					break
				}
			}
		})
	}
}
