package sidecar_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Shutting down while streams (the whole picture, a lock's, a lease's) and
// waits are being opened in a loop: every request is answered (a stream with
// 200 and an end, a wait with its answer or 503) or its connection refused,
// none hangs, and no goroutine of the sidecar is left. A stream or a wait that
// arrives between the end of the streams and the closing of the listener is
// what this is about: under -race it must not start work the shutdown no longer
// waits for (the hijacked streams' count, the Session's goroutines).
//
// The moment that matters is short, so the test shuts down three sidecars.
func TestShutdownWhileStreamsAndWaitsOpen(t *testing.T) {
	zkc := zktest.Shared(t)
	for round := range 3 {
		t.Run(fmt.Sprintf("sidecar %d", round), func(t *testing.T) { shutdownUnderLoad(t, zkc.Servers()) })
	}
}

// shutdownUnderLoad is one round of TestShutdownWhileStreamsAndWaitsOpen.
func shutdownUnderLoad(t *testing.T, servers []string) {
	root := zktest.Root(t)
	base := sidecarGoroutines()
	sc := sidecartest.Start(t, servers, root)
	// One connection per request: a kept-alive connection closed by the
	// shutdown would fail a POST without an answer, and that is no refusal.
	car := &sidecartest.Sidecar{M: sc.M, Base: sc.Base, Client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}}
	holder := sidecartest.Str(car.Must(t, http.StatusCreated, http.MethodPost, "/v1/leases?ttl=60s").Body["lease"])
	car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/shut?lease="+holder) // the waits wait

	var answered, refusedN atomic.Int64
	var bad sync.Map // request -> what went wrong
	closed := make(chan struct{})
	one := func(kind int) (refused bool) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Patience(30*time.Second))
		defer cancel()
		what, err := shutdownRequest(ctx, car, kind)
		switch {
		case err == nil:
			answered.Add(1)
		case isRefused(err):
			refusedN.Add(1)
			return true
		default:
			bad.Store(fmt.Sprintf("%s: %v", what, err), true)
		}
		return false
	}
	// Most clients open streams in turn (kinds 0 to 2), so that many are under
	// way at any moment; some send short waits (kind 3); two keep a long wait
	// open (kind 4), which only the shutdown answers.
	const streamers, waiters = 24, 4
	var clients sync.WaitGroup
	for c := range streamers + waiters + 2 {
		clients.Add(1)
		go func() {
			defer clients.Done()
			for i := c; ; i++ {
				kind := i % streamKinds
				switch {
				case c >= streamers+waiters:
					kind = longWaitKind
				case c >= streamers:
					kind = shortWaitKind
				}
				select {
				case <-closed:
					// The listener is closed now: the connection is refused.
					if !one(kind) {
						bad.Store("a request after Close was not refused", true)
					}
					return
				default:
				}
				one(kind)
			}
		}()
	}
	testutil.Eventually(t, 30*time.Second, "requests answered before the shutdown", func() bool { return answered.Load() >= 40 })

	shut := make(chan error, 1)
	go func() { shut <- sc.M.Close() }()
	select {
	case err := <-shut:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(testutil.Patience(60 * time.Second)):
		t.Fatal("Close did not return")
	}
	close(closed)
	finished := make(chan struct{})
	go func() { clients.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(testutil.Patience(60 * time.Second)):
		t.Fatal("a request was never answered")
	}
	bad.Range(func(k, _ any) bool { t.Error(k); return true })
	t.Logf("%d answered, %d refused", answered.Load(), refusedN.Load())

	deadline := time.Now().Add(testutil.Patience(10 * time.Second))
	for left := sidecarGoroutines(); len(left) > len(base); left = sidecarGoroutines() {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the sidecar left after Close, %d before it started:\n\n%s",
				len(left), len(base), strings.Join(left, "\n\n"))
		}
		time.Sleep(10 * time.Millisecond) // polling, not ordering
	}
}

// The kinds of request shutdownRequest makes: streamKinds kinds of stream (0 to
// 2), then a short wait and a long one.
const (
	streamKinds   = 3
	shortWaitKind = 3
	longWaitKind  = 4
)

// shutdownRequest makes one request of the given kind and reads its answer: a
// stream up to its first event or its end, a wait to its answer. It describes
// the request, and returns an error when the answer is not one the contract
// allows at shutdown (or when there is none).
func shutdownRequest(ctx context.Context, car *sidecartest.Sidecar, kind int) (string, error) {
	switch kind {
	case 0:
		return "GET /v1/events", openAndLeave(ctx, car, "/v1/events")
	case 1:
		return "GET /v1/locks/shut/events", openAndLeave(ctx, car, "/v1/locks/shut/events")
	case 2:
		what := "POST /v1/leases, then its events"
		r, err := car.Do(ctx, http.MethodPost, "/v1/leases?ttl=60s", nil)
		if err != nil {
			return what, err
		}
		switch r.Status {
		case http.StatusCreated:
		case http.StatusServiceUnavailable:
			return what, nil
		default:
			return what, fmt.Errorf("status %d: %s", r.Status, r.Raw)
		}
		return what, openAndLeave(ctx, car, "/v1/leases/"+sidecartest.Str(r.Body["lease"])+"/events", http.StatusNotFound)
	case shortWaitKind:
		return "POST /v1/locks/shut?wait=100ms", wait(ctx, car, "/v1/locks/shut?wait=100ms")
	default:
		return "POST /v1/locks/shut?wait=60s", wait(ctx, car, "/v1/locks/shut?wait=60s")
	}
}

// openAndLeave opens a stream and reads it up to its first event or its end:
// either is an answer (a stream opened as the sidecar shuts down ends at once).
// Besides 200, a stream may be refused with 503 (shutting down) or one of also.
func openAndLeave(ctx context.Context, car *sidecartest.Sidecar, path string, also ...int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, car.Base+path, nil)
	resp, err := car.HC().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusServiceUnavailable, slices.Contains(also, resp.StatusCode):
		return nil
	default:
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	err = sidecartest.ReadEvents(resp.Body, func(sidecartest.Event) bool { return false })
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("no event and no end: %w", err)
	}
	return nil // an event, or the end of the stream (its answer at shutdown)
}

// wait sends a long-poll: its answers are the grant, lock-held, or 503.
func wait(ctx context.Context, car *sidecartest.Sidecar, path string) error {
	r, err := car.Do(ctx, http.MethodPost, path, nil)
	if err != nil {
		return err
	}
	switch r.Status {
	case http.StatusCreated, http.StatusConflict, http.StatusServiceUnavailable:
		return nil
	}
	return fmt.Errorf("status %d: %s", r.Status, r.Raw)
}

// isRefused tells whether err is a request the sidecar did not take, with no
// answer at all: its connection refused (the listener is closed), reset or
// broken (a connection left in the closed listener's backlog), or closed before
// any answer, which net/http does to a connection it accepted before
// http.Server.Shutdown but whose request it reads after (the handler never
// runs). Every request here has a connection of its own.
func isRefused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, io.EOF)
}

// sidecarGoroutines returns the stacks of the goroutines running code of this
// module, other than tests and the test ZooKeeper servers' helpers.
func sidecarGoroutines() []string {
	buf := make([]byte, 8<<20)
	buf = buf[:runtime.Stack(buf, true)]
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "github.com/coord-sidecar/coord-sidecar/") &&
			!strings.Contains(g, "testing.tRunner") && !strings.Contains(g, "/internal/zktest.") &&
			!strings.Contains(g, "coord-sidecar/internal/sidecar_test.shutdownUnderLoad") {
			out = append(out, g)
		}
	}
	return out
}
