package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/client"
)

// The lease verbs beyond grant and revoke: `lease list` and `lease
// keepalive` (kept alive until interrupted, as `etcdctl lease keep-alive`).

func onceFlag(fs *flag.FlagSet, v *cliValues) {
	fs.BoolVar(&v.once, "once", false, "keep the lease alive once and exit")
}

func leaseListFlags(fs *flag.FlagSet, v *cliValues) {
	fs.StringVar(&v.prefix, "prefix", "", "only the leases whose id starts with this")
	pageFlag(fs, v)
}

// pageFlag is the page size of a verb that lists: every page is read anyway.
func pageFlag(fs *flag.FlagSet, v *cliValues) {
	fs.IntVar(&v.pageSize, "page-size", 0, "how many to ask for per request, 1..10000 (default: the sidecar's, 1000); every page is read")
}

// pageLimit is the limit parameter of a list request (nil: the sidecar's).
func (c *cliCall) pageLimit() *int {
	if c.v.pageSize == 0 {
		return nil
	}
	return &c.v.pageSize
}

// leaseList writes every lease of GET /v1/leases, following the pages.
func (c *cliCall) leaseList([]string) int {
	params := &client.ListLeasesParams{Limit: c.pageLimit()}
	if c.v.prefix != "" {
		params.Prefix = &c.v.prefix
	}
	for {
		r, err := c.api.ListLeasesWithResponse(c.sig.ctx, params)
		if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
			return code
		}
		var page struct {
			Leases []json.RawMessage `json:"leases"`
			Next   string            `json:"next"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			fmt.Fprintf(c.stderr, "coord-sidecar %s: the answer is not a list of leases: %v\n", c.name, err)
			return ExitUnavailable
		}
		for _, l := range page.Leases {
			c.jsonLine(l)
		}
		if page.Next == "" {
			return 0
		}
		params.After = &page.Next
	}
}

// leaseKeepalive keeps the lease alive until a signal (exit 128+N), writing
// the lease after each keepalive; with --once it keeps it alive once.
func (c *cliCall) leaseKeepalive(args []string) int {
	if c.v.once {
		r, err := c.api.KeepAliveLeaseWithResponse(c.sig.ctx, args[0])
		if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
			return code
		}
		c.jsonLine(r.Body)
		return 0
	}
	k := keepaliveLoop{c: c, id: args[0]}
	for {
		pause, code, done := k.once()
		if done {
			return code
		}
		if sleep(c.sig.ctx, pause) != nil {
			return c.sig.exitCode()
		}
	}
}

// keepaliveLoop is `lease keepalive` without --once.
type keepaliveLoop struct {
	c      *cliCall
	id     string
	ttl    time.Duration // the lease's, from the last answer (0 before the first)
	lastOK time.Time     // when the last keepalive answered was sent
	b      backoff
	told   bool // the failure being retried was told on stderr
}

// once sends one keepalive: the pause until the next one, or (done) the exit
// code. A failure that is the sidecar restarting or busy is tried again until
// the lease's ttl has passed since the last keepalive answered; the first
// keepalive's failure, and every final answer (404: the lease is gone), end it.
func (k *keepaliveLoop) once() (pause time.Duration, code int, done bool) {
	c := k.c
	sent := time.Now()
	r, err := c.api.KeepAliveLeaseWithResponse(c.sig.ctx, k.id)
	if c.sig.received() != 0 {
		return 0, c.sig.exitCode(), true
	}
	status := 0
	if err == nil {
		status = r.StatusCode()
	}
	if status == http.StatusOK {
		c.jsonLine(r.Body)
		if ttl, perr := time.ParseDuration(r.JSON200.Ttl); perr == nil {
			k.ttl = ttl
		}
		k.lastOK, k.told = sent, false
		k.b.reset()
		return max(k.ttl/3, 100*time.Millisecond), 0, false
	}
	transient := err != nil || status >= 500 || status == http.StatusTooManyRequests
	if !transient || k.ttl == 0 || time.Since(k.lastOK) >= k.ttl {
		if err != nil {
			return 0, c.failed(err, 0, nil), true
		}
		return 0, c.failed(nil, status, r.Body), true
	}
	if !k.told {
		k.told = true
		why := fmt.Sprint(err)
		if err == nil {
			why = problemDetail(status, r.Body)
		}
		fmt.Fprintf(c.stderr, "coord-sidecar %s: %s; trying again until %s\n", c.name, why, k.lastOK.Add(k.ttl).Format(time.RFC3339Nano))
	}
	return k.b.pause(), 0, false
}
