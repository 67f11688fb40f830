package sidecar_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The abuse set (issue 40): careless or hostile clients on loopback beside a
// good one, whose lock cycles must go on in each: idle kept-alive connections
// filling --max-conns, slowloris connections, a refused client keeping its
// connection, a request with both Transfer-Encoding and Content-Length. Each
// is bounded in time by generous deadlines, and asserts no duration.

// goodClient runs lock cycles (acquire, release) on lock of car on a client
// of its own until the test ends; its count of completed cycles is returned.
// With fresh, every request comes on a new connection (as when a client's
// connections are closed under it, or a new client comes); else on one kept
// alive. A cycle that fails (a refused or reset connection) is retried: what
// the tests check is that cycles go on.
func goodClient(t *testing.T, car *sidecartest.Sidecar, lock string, fresh bool) *atomic.Int64 {
	t.Helper()
	var cycles atomic.Int64
	good := &sidecartest.Sidecar{Base: car.Base, Hdr: car.Hdr,
		Client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, DisableKeepAlives: fresh}}}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := good.Do(cctx, http.MethodPost, "/v1/locks/"+lock+"?ttl=30s&wait=5s", nil)
			if err == nil && r.Status == http.StatusCreated {
				lease := sidecartest.Str(r.Body["lease"])
				r, err = good.Do(cctx, http.MethodDelete, "/v1/locks/"+lock+"?lease="+lease, nil)
				if err == nil && r.Status == http.StatusNoContent {
					cycles.Add(1)
				}
			}
			ccancel()
			if err != nil && ctx.Err() == nil {
				time.Sleep(10 * time.Millisecond) // not a busy loop while refused
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		good.Client.CloseIdleConnections()
	})
	return &cycles
}

// cyclesGoOn waits until the good client has completed n more cycles.
func cyclesGoOn(t *testing.T, cycles *atomic.Int64, n int64, what string) {
	t.Helper()
	from := cycles.Load()
	testutil.Eventually(t, 60*time.Second, fmt.Sprintf("%d more lock cycles %s (from %d)", n, what, from), func() bool {
		return cycles.Load() >= from+n
	})
}

// rawConn is a TCP connection to car's listener, closed at the test's end.
func rawConn(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes req on c and reads one answer.
func roundTrip(c net.Conn, br *bufio.Reader, req string) (*http.Response, error) {
	_ = c.SetDeadline(time.Now().Add(testutil.Patience(20 * time.Second)))
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// closedByServer reports whether the server closes c (a read ends with EOF
// or a reset) within a generous deadline; false if it is still open then.
func closedByServer(c net.Conn, br *bufio.Reader, within time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(testutil.Patience(within)))
	_, err := br.ReadByte()
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

// idleClients keeps n connections open to addr, each having made one request
// (GET /healthz) and then sending nothing, like a load tool that keeps its
// connections; a connection the server closes is opened again, pausing a
// little so as not to spin. It runs until the test ends.
func idleClients(t *testing.T, addr string, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := net.DialTimeout("tcp", addr, 5*time.Second)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				br := bufio.NewReader(c)
				if _, err := roundTrip(c, br, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err == nil {
					_ = c.SetReadDeadline(time.Time{})
					_, _ = br.ReadByte() // until the server closes it
				}
				stop()
				c.Close()
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// Idle kept-alive connections no longer lock everyone out: with twice
// --max-conns careless clients each keeping a connection after one request,
// the longest-idle is closed to make room, so a new client is served, the
// good client's lock cycles go on, /metrics counts the connections by state,
// and reaching the cap is logged. (Before: every new connection waited in the
// backlog until the two-minute idle timeout.)
func TestIdleConnectionsAtTheCap(t *testing.T) {
	zkc := zktest.Shared(t)
	car, logs := startLoggedSidecar(t, zkc.Servers(), zktest.Root(t), "--max-conns", "20")
	car.WaitReady(t)
	cycles := goodClient(t, car, "good-idle", true)
	cyclesGoOn(t, cycles, 3, "before the idle clients")
	idleClients(t, car.M.Addr(), 40)
	cyclesGoOn(t, cycles, 5, "while idle connections press on the cap")
	testutil.Eventually(t, 30*time.Second, "the cap reached and logged", func() bool {
		return strings.Contains(logs.String(), "--max-conns")
	})
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: testutil.Patience(20 * time.Second)}
	for range 3 {
		resp, err := fresh.Get(car.Base + "/healthz")
		if err != nil {
			t.Fatalf("a new client at the cap: %v", err)
		}
		resp.Body.Close()
	}
	testutil.Eventually(t, 30*time.Second, "coord_http_connections by state", func() bool {
		resp, err := fresh.Get(car.Base + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), `coord_http_connections{state="idle"}`) &&
			strings.Contains(string(b), `coord_http_connections{state="active"}`)
	})
}

// --idle-timeout closes a kept-alive connection idle that long.
func TestIdleTimeout(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--idle-timeout", "1s")
	c := rawConn(t, car.M.Addr())
	br := bufio.NewReader(c)
	if resp, err := roundTrip(c, br, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz: %v %v", resp, err)
	}
	if !closedByServer(c, br, 30*time.Second) {
		t.Fatal("an idle connection outlived --idle-timeout 1s by far")
	}
}

// A 401 or 403 keeps no connection: a client refused sends nothing else on it.
func TestRefusedKeepsNoConnection(t *testing.T) {
	zkc := zktest.Shared(t)
	dir := t.TempDir()
	file := sidecartest.WriteFile(t, dir, "tokens.json", []byte(`{"tokens":[
 {"name":"a","token":"refused-a-token-0123456789","allow":["locks/a-*"]}]}`))
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--tokens-file", file)
	for _, c := range []struct {
		name, req string
		status    int
	}{
		{"no token", "GET /v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", http.StatusUnauthorized},
		{"a wrong token", "GET /v1/session HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer nope-nope-nope-nope\r\n\r\n", http.StatusUnauthorized},
		{"outside its allow list", "GET /v1/locks/b-1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer refused-a-token-0123456789\r\n\r\n", http.StatusForbidden},
		{"a Host not allowed", "GET /v1/session HTTP/1.1\r\nHost: evil.example\r\nAuthorization: Bearer refused-a-token-0123456789\r\n\r\n", http.StatusForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := rawConn(t, car.M.Addr())
			br := bufio.NewReader(conn)
			resp, err := roundTrip(conn, br, c.req)
			if err != nil || resp.StatusCode != c.status {
				t.Fatalf("%v %v, want %d", resp, err, c.status)
			}
			if !closedByServer(conn, br, 20*time.Second) {
				t.Fatalf("the connection of a %d stays open", c.status)
			}
		})
	}
}

// A request with both Transfer-Encoding and Content-Length (RFC 9112 §6.1)
// is read by its Transfer-Encoding alone and its connection closed after the
// answer: what follows on the connection, by the Content-Length a proxy may
// have used the body of the first, is never served as a request.
func TestSmuggledRequestNotServed(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	cycles := goodClient(t, car, "good-smuggle", true)
	smuggled := "POST /v1/counters/smuggled?add=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n"
	// The first request's body by Transfer-Encoding: an empty chunked body;
	// by Content-Length: that and the smuggled request.
	chunked := "0\r\n\r\n"
	first := fmt.Sprintf("POST /v1/counters/front?add=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n%s",
		len(chunked)+len(smuggled), chunked)
	c := rawConn(t, car.M.Addr())
	br := bufio.NewReader(c)
	resp, err := roundTrip(c, br, first+smuggled)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("the first request: %d, want 400 or 200", resp.StatusCode)
	}
	if !closedByServer(c, br, 20*time.Second) {
		t.Fatal("the connection stays open after a request with Transfer-Encoding and Content-Length")
	}
	// The smuggled request was not served, now or later.
	cyclesGoOn(t, cycles, 3, "beside the smuggling")
	if v := sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/counters/smuggled").Body["value"]); v != 0 {
		t.Fatalf("the smuggled request was served: counter %d", v)
	}
}

// Slowloris connections (headers sent a byte at a time) take no place for
// good: at --max-conns with none idle, the oldest connection that has not
// sent its first request within a second is closed to make room (else
// --read-header-timeout would close it, here 10 minutes). At twice
// --max-conns of them, the good client's lock cycles, each request on a new
// connection, go on.
func TestSlowlorisAtTheCap(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), "--max-conns", "20", "--read-header-timeout", "10m")
	cycles := goodClient(t, car, "good-slowloris", true)
	cyclesGoOn(t, cycles, 3, "before the slowloris clients")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				c, err := net.DialTimeout("tcp", car.M.Addr(), 5*time.Second)
				if err != nil {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				for _, b := range []byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ") {
					if _, err := c.Write([]byte{b}); err != nil || ctx.Err() != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				for ctx.Err() == nil { // then a header that never ends
					if _, err := c.Write([]byte("a")); err != nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				stop()
				c.Close()
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })
	cyclesGoOn(t, cycles, 5, "while slowloris connections press on the cap")
}
