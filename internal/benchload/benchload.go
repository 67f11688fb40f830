// Package benchload is the load side of the lock benchmarks, shared by
// `make bench`'s load generator (cmd/coord-bench) and the go test benchmarks
// (cmd/coord-sidecar): one HTTP call as a client makes it, one acquire+release
// cycle of the sidecar's lock as curl would make it, and the check that a hot
// lock's holders never overlap.
package benchload

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// Send makes one request (body, when not nil, as JSON, with its Content-Type) and decodes a JSON answer
// into out (when not nil). The answer is read to its end, so that the
// connection is reused; a status other than want is an error.
func Send(ctx context.Context, c *http.Client, method, u string, body any, want int, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, u, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, u, resp.StatusCode, want, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: bad JSON %q: %w", method, u, raw, err)
		}
	}
	return nil
}

// SidecarLock is one client of a sidecar's lock (or read/write lock), as a shell
// script with curl uses it: an implicit lease per acquisition.
type SidecarLock struct {
	Client *http.Client
	// AcquireURL is POSTed (201); ReleaseURL, with the grant's lease id
	// appended, is DELETEd (204).
	AcquireURL, ReleaseURL string
	// Hold is how long a holder keeps the lock before it releases (0: none).
	Hold time.Duration
}

// NewSidecarLock is a client of the lock at lockURL (…/v1/locks/NAME) that
// waits up to 30 s.
func NewSidecarLock(c *http.Client, lockURL string) *SidecarLock {
	return &SidecarLock{Client: c, AcquireURL: lockURL + "?wait=30s", ReleaseURL: lockURL + "?lease="}
}

// Cycle acquires the lock (POST, 201) and releases it (DELETE, 204), checking on
// x (when not nil) that no other holder overlaps and that fencing tokens rise.
func (l *SidecarLock) Cycle(ctx context.Context, x *Exclusion) error {
	var grant struct {
		Lease        string `json:"lease"`
		FencingToken int64  `json:"fencingToken"`
	}
	if err := Send(ctx, l.Client, http.MethodPost, l.AcquireURL, nil, http.StatusCreated, &grant); err != nil {
		return err
	}
	err := x.Enter(grant.FencingToken)
	time.Sleep(l.Hold)
	x.Leave()
	if rerr := Send(ctx, l.Client, http.MethodDelete, l.ReleaseURL+url.QueryEscape(grant.Lease), nil, http.StatusNoContent, nil); err == nil {
		err = rerr
	}
	return err
}

// Exclusion checks, for the holders of one lock, that no two hold it at once
// and, when tokens are given (> 0), that fencing tokens strictly increase; it
// also times the handoffs. A nil *Exclusion checks nothing.
type Exclusion struct {
	holders   atomic.Int32
	lastToken atomic.Int64 // written only by the holder
	// left is when the last holder let go (UnixNano); gaps and gapSum count the
	// handoffs and their time from one holder's let-go to the next one's grant.
	left, gaps, gapSum atomic.Int64
}

// Enter records a new holder with its fencing token (0: none).
func (x *Exclusion) Enter(token int64) error {
	if x == nil {
		return nil
	}
	if n := x.holders.Add(1); n != 1 {
		return fmt.Errorf("%d holders at once", n)
	}
	if token > 0 {
		if last := x.lastToken.Load(); token <= last {
			return fmt.Errorf("fencing token %d after %d", token, last)
		}
		x.lastToken.Store(token)
	}
	if left := x.left.Load(); left > 0 {
		x.gaps.Add(1)
		x.gapSum.Add(time.Now().UnixNano() - left)
	}
	return nil
}

// Leave records that the holder let go.
func (x *Exclusion) Leave() {
	if x != nil {
		x.left.Store(time.Now().UnixNano())
		x.holders.Add(-1)
	}
}

// MeanGap is the mean handoff time (0 when nothing was handed over).
func (x *Exclusion) MeanGap() time.Duration {
	if x == nil || x.gaps.Load() == 0 {
		return 0
	}
	return time.Duration(x.gapSum.Load() / x.gaps.Load())
}
