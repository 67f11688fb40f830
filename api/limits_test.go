package api_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// Past --max-waiters long-polls and --max-streams streams, requests answer 503
// with Retry-After at once; when one ends, the next is served.
func TestConcurrencyCaps(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--max-waiters", "2", "--max-streams", "1")
	holder := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/capped")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		go func() {
			_, _ = car.Do(ctx, http.MethodPost, fmt.Sprintf("/v1/locks/capped?wait=60s&owner=w%d", i), nil)
		}()
	}
	testutil.Eventually(t, 10*time.Second, "two waiters", func() bool {
		return sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/capped").Body["waiters"]) == 2
	})
	r := car.Must(t, http.StatusServiceUnavailable, http.MethodPost, "/v1/locks/capped?wait=60s")
	if r.Header.Get("Retry-After") == "" || sidecartest.Str(r.Body["type"]) != "https://coord-sidecar.dev/problems/too-many-long-polls" {
		t.Fatalf("third waiter: %s %v", r.Raw, r.Header)
	}
	// The cap reads the query as the handler does, escapes included.
	r = car.Must(t, http.StatusServiceUnavailable, http.MethodPost, "/v1/locks/capped?%77ait=60s")
	if sidecartest.Str(r.Body["type"]) != "https://coord-sidecar.dev/problems/too-many-long-polls" {
		t.Fatalf("escaped wait: %s", r.Raw)
	}
	car.Must(t, http.StatusConflict, http.MethodPost, "/v1/locks/capped") // try-once is not a long-poll

	st := car.OpenStream(t, "/v1/session/events")
	st.Next(t, 5*time.Second)
	r = car.Must(t, http.StatusServiceUnavailable, http.MethodGet, "/v1/session/events")
	if sidecartest.Str(r.Body["type"]) != "https://coord-sidecar.dev/problems/too-many-streams" {
		t.Fatalf("second stream: %s", r.Raw)
	}
	st.Cancel()
	testutil.Eventually(t, 10*time.Second, "a stream slot frees", func() bool { return car.StreamStatus("/v1/session/events") == 200 })
	car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/capped?lease="+sidecartest.Str(holder.Body["lease"]))
}

// A client that trickles its headers (slowloris) is cut off at the header timeout.
func TestSlowlorisIsCutAtHeaderTimeout(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--read-header-timeout", "1s")
	conn, err := net.Dial("tcp", car.M.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := fmt.Fprint(conn, "GET /healthz HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan time.Duration, 1)
	go func() {
		_, _ = bufio.NewReader(conn).ReadString('\n') // returns when the server hangs up
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case d := <-closed:
			if d > testutil.Patience(3*time.Second) {
				t.Fatalf("cut after %s, header timeout 1s", d)
			}
			t.Logf("cut after %s", d.Round(time.Millisecond))
			return
		case <-tick.C:
			if _, err := fmt.Fprint(conn, "X-Slow: y\r\n"); err != nil {
				continue // the server hung up; the reader reports when
			}
			if time.Since(start) > testutil.Patience(10*time.Second) {
				t.Fatal("still connected after 10s of trickled headers")
			}
		}
	}
}
