package statedir

import (
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/coord-sidecar/coord-sidecar/internal/jsonstr"
)

// The journal's records are written on the request path (Commit), so the
// three that every grant and release writes (a lease's values, a hold, an
// end) are appended by hand: the same bytes encoding/json writes for a
// record (TestRecordsAreWhatEncodingJSONWrites), without its reflection,
// which was 7 % of a busy sidecar's CPU (docs/BENCHMARKS.md, "Restarts").
// Anything unusual (a hold's Data, a lease's waiting requests, a string that
// is not plain UTF-8) goes through encoding/json.

// appendRecord appends r as one line.
func appendRecord(b []byte, r record) ([]byte, error) {
	switch {
	case r.Lease != nil && plainLease(r.Lease):
		b = append(b, `{"lease":`...)
		b = appendLease(b, r.Lease)
	case r.Hold != nil && plainHold(r.Hold):
		b = append(b, `{"hold":`...)
		b = appendLeaseHold(b, r.Hold)
	case r.Drop != nil && plainHold(r.Drop):
		b = append(b, `{"drop":`...)
		b = appendLeaseHold(b, r.Drop)
	case r.End != "" && plainString(r.End) && r.Lease == nil && r.Hold == nil && r.Drop == nil && r.Session == nil:
		b = append(b, `{"end":`...)
		b = jsonstr.Append(b, r.End)
	default:
		line, err := json.Marshal(r)
		if err != nil {
			return b, err
		}
		return append(append(b, line...), '\n'), nil
	}
	return append(b, "}\n"...), nil
}

func plainLease(l *Lease) bool {
	return len(l.Holds) == 0 && len(l.Waiting) == 0 && plainString(l.ID) && plainString(l.Owner)
}

func plainHold(h *leaseHold) bool {
	if h.Data != nil || !plainString(h.Lease) || !plainString(h.Kind) || !plainString(h.Name) {
		return false
	}
	for _, n := range h.Nodes {
		if !plainString(n) {
			return false
		}
	}
	return true
}

// plainString tells whether appendString writes s as encoding/json does:
// valid UTF-8 without the characters that encoding/json escapes beyond the
// control characters, quote and backslash (<, >, &, U+2028, U+2029).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '<' || c == '>' || c == '&':
			return false
		case c >= utf8.RuneSelf:
			return utf8.ValidString(s) && !containsLineSeparators(s)
		}
	}
	return true
}

func containsLineSeparators(s string) bool {
	for _, r := range s {
		if r == '\u2028' || r == '\u2029' {
			return true
		}
	}
	return false
}

// appendLease appends a Lease without holds, as encoding/json does.
func appendLease(b []byte, l *Lease) []byte {
	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, l.ID)
	b = append(b, `,"ttl":`...)
	b = strconv.AppendInt(b, int64(l.TTL), 10)
	b = append(b, `,"expiresAt":"`...)
	b = l.ExpiresAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if l.Pinned {
		b = append(b, `,"pinned":true`...)
	}
	if l.Owner != "" {
		b = append(b, `,"owner":`...)
		b = jsonstr.Append(b, l.Owner)
	}
	if l.Implicit {
		b = append(b, `,"implicit":true`...)
	}
	if l.StreamBound {
		b = append(b, `,"streamBound":true`...)
	}
	return append(b, '}')
}

// appendLeaseHold appends a leaseHold without Data, as encoding/json does.
func appendLeaseHold(b []byte, h *leaseHold) []byte {
	b = append(b, `{"lease":`...)
	b = jsonstr.Append(b, h.Lease)
	b = append(b, `,"kind":`...)
	b = jsonstr.Append(b, h.Kind)
	b = append(b, `,"name":`...)
	b = jsonstr.Append(b, h.Name)
	b = append(b, `,"nodes":`...)
	if h.Nodes == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, n := range h.Nodes {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonstr.Append(b, n)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}
