package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/internal/jsonstr"
)

// The answers of the hot routes, written without reflection. The generated
// code writes every JSON answer with a json.Encoder into a buffer of its own:
// reflection over the answer's type, a time.Time marshalled and then
// re-validated, three or four allocations, about a tenth of a lock cycle's CPU
// in the sidecar's process (docs/BENCHMARKS.md, "Per-route cost"). answerDirect
// is a strict middleware of the hot operations: it lets the handler run as
// generated, and when its answer is one of the types below, writes it itself,
// byte for byte what the generated code writes (the same members in the same
// order, the same escaping, the same trailing newline: answers_test.go compares
// both), and hands the generated code nothing left to write. An answer it does
// not know, an error, or a value it cannot write the same way (a time outside
// the years 0-9999, which encoding/json refuses) goes on to the generated code
// unchanged.

// answerDirect is the strict middleware (oapi.StrictMiddlewareFunc): for the
// operations whose answers it writes, a wrapper; for any other, the handler
// itself (nothing added to the request).
func answerDirect(f oapi.StrictHandlerFunc, operationID string) oapi.StrictHandlerFunc {
	if !directOps[operationID] {
		return f
	}
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, request any) (any, error) {
		response, err := f(ctx, w, r, request)
		if err != nil || !writeDirect(w, response) {
			return response, err
		}
		return nil, nil
	}
}

// directOps are the operations whose success answers writeDirect knows.
var directOps = map[string]bool{
	"AcquireLock": true, "AcquirePermit": true, "CreateLease": true, "KeepAliveLease": true, "PutKey": true,
}

// writeDirect writes response when it is one of the answers it knows and
// reports whether it did.
func writeDirect(w http.ResponseWriter, response any) bool {
	bp := answerBufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 64<<10 { // an answer with a huge owner= leaves its buffer to the GC
			answerBufs.Put(bp)
		}
	}()
	b := (*bp)[:0]
	var status int
	ok := true
	switch v := response.(type) {
	case oapi.AcquireLock201JSONResponse:
		status = http.StatusCreated
		b = append(b, `{"acquiredAt":`...)
		b, ok = appendTime(b, v.AcquiredAt)
		b = append(b, `,"fencingToken":`...)
		b = strconv.AppendInt(b, v.FencingToken, 10)
		b = appendMember(b, "lease", v.Lease)
		b = appendMember(b, "name", v.Name)
		b = appendMember(b, "owner", v.Owner)
	case oapi.AcquirePermit201JSONResponse:
		status = http.StatusCreated
		b = append(b, `{"acquiredAt":`...)
		b, ok = appendTime(b, v.AcquiredAt)
		b = appendMember(b, "lease", v.Lease)
		b = append(b, `,"max":`...)
		b = strconv.AppendInt(b, int64(v.Max), 10)
		b = appendMember(b, "name", v.Name)
		b = appendMember(b, "owner", v.Owner)
		b = appendMember(b, "permit", v.Permit)
	case oapi.CreateLease201JSONResponse:
		status = http.StatusCreated
		b, ok = appendLease(b, oapi.Lease(v))
	case oapi.KeepAliveLease200JSONResponse:
		status = http.StatusOK
		b, ok = appendLease(b, oapi.Lease(v))
	case oapi.PutKey200JSONResponse:
		status = http.StatusOK
		b = append(b, `{"key":`...)
		b = jsonstr.Append(b, v.Key)
		b = append(b, `,"version":`...)
		b = strconv.AppendInt(b, int64(v.Version), 10)
	default:
		return false
	}
	if !ok {
		return false
	}
	b = append(b, "}\n"...)
	*bp = b
	w.Header()["Content-Type"] = jsonContentType[:1:1] // shared, never written in place: an Add copies
	w.WriteHeader(status)
	_, _ = w.Write(b)
	return true
}

// appendLease is a Lease's members: expiresAt, lease, ttl.
func appendLease(b []byte, l oapi.Lease) ([]byte, bool) {
	b = append(b, `{"expiresAt":`...)
	b, ok := appendTime(b, l.ExpiresAt)
	b = appendMember(b, "lease", l.Lease)
	b = appendMember(b, "ttl", l.Ttl)
	return b, ok
}

var (
	jsonContentType = []string{"application/json"}
	// answerBufs are the answers' buffers: the ResponseWriter copies what it
	// is given (io.Writer's contract), so a buffer is reused once written.
	answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}
)

// appendMember appends `,"name":` and the JSON string of v.
func appendMember(b []byte, name, v string) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return jsonstr.Append(b, v)
}

// appendTime appends t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, quoted); false when MarshalJSON would fail (a year outside
// 0-9999, an offset of a day or more).
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off <= -24*60*60 || off >= 24*60*60 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}
