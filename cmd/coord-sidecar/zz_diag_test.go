package main

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func received(t testing.TB, addr string) int64 {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "srvr")
	b, _ := io.ReadAll(c)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Received: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return -1
}

func TestDiag(t *testing.T) {
	env := newBenchEnv(t)
	addr := env.conn.Server()
	h := env.httpLock("diag")
	l := env.zkLock("diag")
	ctx := context.Background()
	const n = 500
	for range 20 {
		h.cycle(ctx, nil)
		zkCycle(l, nil)
	}
	r0 := received(t, addr)
	var post, del time.Duration
	start := time.Now()
	for range n {
		var g struct{ Lease string }
		t0 := time.Now()
		if err := h.send(ctx, "POST", h.acquireURL, 201, &g); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		if err := h.send(ctx, "DELETE", h.releaseURL+g.Lease, 204, nil); err != nil {
			t.Fatal(err)
		}
		post += t1.Sub(t0)
		del += time.Since(t1)
	}
	el := time.Since(start)
	r1 := received(t, addr)
	t.Logf("sidecar: %v/cycle, post %v del %v, zk packets/cycle %.2f", el/n, post/n, del/n, float64(r1-r0-1)/n)
	var lk, ul time.Duration
	start = time.Now()
	for range n {
		t0 := time.Now()
		l.Lock()
		t1 := time.Now()
		l.Unlock()
		lk += t1.Sub(t0)
		ul += time.Since(t1)
	}
	el = time.Since(start)
	r2 := received(t, addr)
	t.Logf("inproc: %v/cycle, lock %v unlock %v, zk packets/cycle %.2f", el/n, lk/n, ul/n, float64(r2-r1-1)/n)
	// bare zk round trip
	start = time.Now()
	for range n {
		env.conn.Exists("/")
	}
	t.Logf("exists RTT %v", time.Since(start)/n)
	start = time.Now()
	for range n {
		resp, err := env.client.Get(env.sc.base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	t.Logf("healthz RTT %v", time.Since(start)/n)
}
