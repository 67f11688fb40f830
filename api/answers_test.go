package api

import (
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
)

// TestAnswersDirectAsGenerated: for every answer writeDirect knows, what it
// writes (status, Content-Type, body) is byte for byte what the generated
// Visit method writes, over strings that need every kind of escaping
// (quotes, control characters, HTML characters, U+2028/2029, invalid UTF-8,
// random bytes) and times in several zones and precisions; a value the
// generated code cannot write (a year past 9999) is left to it.
func TestAnswersDirectAsGenerated(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 2))
	strs := []string{"", "a", "lock-1", `q"uo\te`, "<b>&amp;</b>", "tab\tnl\nnul\x00\x1f\x7f", "\u2028\u2029é€😀",
		"bad\xffutf8\xc3", "\xe2\x80", strings.Repeat("x", 3000)}
	for range 200 {
		b := make([]byte, rng.IntN(24))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		strs = append(strs, string(b))
	}
	zones := []*time.Location{time.UTC, time.FixedZone("", 5*3600+1800), time.FixedZone("X", -7*3600)}
	times := []time.Time{time.Unix(0, 0).UTC(), time.Date(2026, 11, 28, 8, 1, 19, 6249430, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)}
	for _, z := range zones {
		times = append(times, time.Date(2025, 6, 7, 8, 9, 10, 123456789, z))
	}
	pick := func() string { return strs[rng.IntN(len(strs))] }
	check := func(direct any, generated func(http.ResponseWriter) error) {
		t.Helper()
		dw, gw := httptest.NewRecorder(), httptest.NewRecorder()
		if !writeDirect(dw, direct) {
			t.Fatalf("writeDirect refused %#v", direct)
		}
		if err := generated(gw); err != nil {
			t.Fatal(err)
		}
		if dw.Code != gw.Code || dw.Header().Get("Content-Type") != gw.Header().Get("Content-Type") || dw.Body.String() != gw.Body.String() {
			t.Fatalf("direct %d %q %q\ngenerated %d %q %q", dw.Code, dw.Header().Get("Content-Type"), dw.Body.String(),
				gw.Code, gw.Header().Get("Content-Type"), gw.Body.String())
		}
	}
	for i := 0; i < 2000; i++ {
		at := times[i%len(times)]
		lock := oapi.AcquireLock201JSONResponse{AcquiredAt: at, FencingToken: rng.Int64() - rng.Int64(), Lease: pick(), Name: pick(), Owner: pick()}
		check(lock, lock.VisitAcquireLockResponse)
		permit := oapi.AcquirePermit201JSONResponse{AcquiredAt: at, Lease: pick(), Max: rng.IntN(1 << 20), Name: pick(), Owner: pick(), Permit: pick()}
		check(permit, permit.VisitAcquirePermitResponse)
		created := oapi.CreateLease201JSONResponse{ExpiresAt: at, Lease: pick(), Ttl: pick()}
		check(created, created.VisitCreateLeaseResponse)
		kept := oapi.KeepAliveLease200JSONResponse{ExpiresAt: at, Lease: pick(), Ttl: pick()}
		check(kept, kept.VisitKeepAliveLeaseResponse)
		put := oapi.PutKey200JSONResponse{Key: pick(), Version: rng.Int32() - rng.Int32()}
		check(put, put.VisitPutKeyResponse)
	}
	if writeDirect(httptest.NewRecorder(), oapi.AcquireLock201JSONResponse{AcquiredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}) {
		t.Fatal("writeDirect wrote a time encoding/json refuses")
	}
	if writeDirect(httptest.NewRecorder(), oapi.GetLock200JSONResponse{}) {
		t.Fatal("writeDirect wrote an answer it does not know")
	}
}

// BenchmarkAnswerLockGrant: a lock grant's answer written by the generated
// code and by writeDirect, into a recorder reset each time.
func BenchmarkAnswerLockGrant(b *testing.B) {
	g := oapi.AcquireLock201JSONResponse{AcquiredAt: time.Now().UTC(), FencingToken: 1234567, Lease: "hd4e74x57g77gkriisnq",
		Name: "orders-7", Owner: "worker-12.example"}
	w := httptest.NewRecorder()
	b.Run("generated", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Body.Reset()
			clear(w.Header())
			_ = g.VisitAcquireLockResponse(w)
		}
	})
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			w.Body.Reset()
			clear(w.Header())
			writeDirect(w, g)
		}
	})
}
