package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// opMulti is ZooKeeper's multi opcode: every key and counter write is one.
const opMulti = 14

// A write whose answer is lost with its connection (the server applied it, or
// never got it) is answered once the connection is back with what actually
// happened, applied exactly once: a key put, a conditional put, a key delete
// and a counter add.
func TestWriteWhoseAnswerIsLostIsAnsweredOnce(t *testing.T) {
	zkc := zktest.Shared(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	car := sidecartest.Start(t, []string{proxy.Addr()}, zktest.Root(t), "--session-timeout", "20s", "--suspend-wait", "60s")

	send := func(method, path, body string) *sidecartest.Response {
		t.Helper()
		var r *sidecartest.Response
		var err error
		if body != "" {
			r, err = car.Do(context.Background(), method, path, strings.NewReader(body), "Content-Type", "text/plain")
		} else {
			r, err = car.Do(context.Background(), method, path, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	expect := func(what string, r *sidecartest.Response, status int) {
		t.Helper()
		if r.Status != status {
			t.Fatalf("%s: %d, want %d: %s", what, r.Status, status, r.Raw)
		}
	}
	key := func(what, data, version string) {
		t.Helper()
		r := send(http.MethodGet, "/v1/kv/k", "")
		expect(what+": GET", r, http.StatusOK)
		if string(r.Raw) != data || r.Header.Get("Version") != version {
			t.Fatalf("%s: key %q at version %s, want %q at version %s", what, r.Raw, r.Header.Get("Version"), data, version)
		}
	}
	counter := func(what string, want int64) {
		t.Helper()
		if v := sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/counters/c").Body["value"]); v != want {
			t.Fatalf("%s: counter %d, want %d", what, v, want)
		}
	}
	lost := func(outcome string) float64 {
		return sidecartest.MetricValue(t, car, `coord_write_answer_lost_total{outcome="`+outcome+`"}`)
	}
	lostConnections := func() int { return proxy.Accepted() }

	expect("first put", send(http.MethodPut, "/v1/kv/k", "0"), http.StatusOK)
	expect("first add", send(http.MethodPost, "/v1/counters/c", ""), http.StatusOK)
	counter("first add", 1)

	// Applied, answer lost: adopted.
	before := lostConnections()
	proxy.LoseAnswer(opMulti)
	expect("put, answer lost", send(http.MethodPut, "/v1/kv/k", "1"), http.StatusOK)
	key("put, answer lost", "1", "1")
	if lostConnections() == before {
		t.Fatal("the put's connection was not lost")
	}
	proxy.LoseAnswer(opMulti)
	expect("conditional put, answer lost", send(http.MethodPut, "/v1/kv/k?version=1", "2"), http.StatusOK)
	key("conditional put, answer lost", "2", "2")
	proxy.LoseAnswer(opMulti)
	r := send(http.MethodPost, "/v1/counters/c", "")
	expect("add, answer lost", r, http.StatusOK)
	if v := sidecartest.Num(r.Body["value"]); v != 2 {
		t.Fatalf("add, answer lost: answered %d, want 2", v)
	}
	counter("add, answer lost", 2)
	if n := lost("applied"); n != 3 {
		t.Fatalf("%v writes adopted, want 3", n)
	}

	// Never applied (the request lost): sent again, applied once.
	proxy.LoseRequest(opMulti)
	expect("put, request lost", send(http.MethodPut, "/v1/kv/k", "3"), http.StatusOK)
	key("put, request lost", "3", "3")
	proxy.LoseRequest(opMulti)
	expect("conditional put, request lost", send(http.MethodPut, "/v1/kv/k?version=3", "4"), http.StatusOK)
	key("conditional put, request lost", "4", "4")
	proxy.LoseRequest(opMulti)
	expect("add, request lost", send(http.MethodPost, "/v1/counters/c", ""), http.StatusOK)
	counter("add, request lost", 3)
	if n := lost("resent"); n != 3 {
		t.Fatalf("%v writes sent again, want 3", n)
	}

	// A conditional put whose version no longer matches, request lost: the
	// resend is refused as it would have been (409), nothing written.
	proxy.LoseRequest(opMulti)
	expect("stale put, request lost", send(http.MethodPut, "/v1/kv/k?version=1", "x"), http.StatusConflict)
	key("stale put, request lost", "4", "4")

	// Deletes: applied with the answer lost, then never applied.
	proxy.LoseAnswer(opMulti)
	expect("delete, answer lost", send(http.MethodDelete, "/v1/kv/k", ""), http.StatusNoContent)
	expect("deleted key", send(http.MethodGet, "/v1/kv/k", ""), http.StatusNotFound)
	expect("put again", send(http.MethodPut, "/v1/kv/k", "5"), http.StatusOK)
	proxy.LoseRequest(opMulti)
	expect("delete, request lost", send(http.MethodDelete, "/v1/kv/k", ""), http.StatusNoContent)
	expect("deleted key", send(http.MethodGet, "/v1/kv/k", ""), http.StatusNotFound)
	if n := lost("unknown"); n != 0 {
		t.Fatalf("%v writes of unknown outcome, want 0", n)
	}
	if s := sidecartest.Str(car.Must(t, http.StatusOK, http.MethodGet, "/v1/session").Body["state"]); s != "connected" {
		t.Fatalf("session %s, want connected (the same session)", s)
	}
}
