package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/client"
)

// `group join` (a wrapper: a member while the command runs), `barrier
// wait`, and the queue's claims: `queue take --claim`, `queue ack`.

const groupJoinUsage = `group join NAME --id ID [--value V] [flags] -- COMMAND ARGS...

Joins the membership group NAME as member ID (Curator's GroupMember layout: its
members and Curator's see each other) on a lease the wrapper keeps alive, runs
COMMAND with COORD_LEASE in its environment while the lease lives, leaves the
group when COMMAND exits and exits with its code: ID is a member exactly while
COMMAND runs. Everything else is as the lock wrapper does it (coord-sidecar lock
--help): signals passed on (exit 128+N), a restart of the sidecar or a
suspension of its session ridden through. It exits 65 when the group has a
live member ID already (COMMAND never started), 76 when the lease (or the
membership) was lost while COMMAND ran: COMMAND was stopped.`

// RunGroupJoin implements `coord-sidecar group join NAME --id ID [flags] --
// COMMAND ARGS...` (groupJoinUsage), with runHeld.
func RunGroupJoin(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var id, value string
	return runHeld(sig, args, getenv, stdout, stderr, heldKind{
		name: "group join", what: "the membership", usage: groupJoinUsage, noWait: true,
		flags: func(fs *flag.FlagSet) func() string {
			fs.StringVar(&id, "id", "", "the member's id, unique in the group (required)")
			fs.StringVar(&value, "value", "", "the member's value: free text, its node's data")
			return func() string {
				if id == "" {
					return "--id is required"
				}
				return ""
			}
		},
		acquire: func(ctx context.Context, c *apiClient, name string, q url.Values) (holding, error) {
			group := "/v1/groups/" + url.PathEscape(name)
			q.Set("id", id)
			err := c.call(ctx, http.MethodPost, group+"/members", q, map[string]string{"value": value}, nil)
			return holding{release: group + "/members/" + url.PathEscape(id), query: url.Values{"lease": q["lease"]}}, err
		},
	})
}

func barrierWaitFlag(fs *flag.FlagSet, v *cliValues) {
	fs.StringVar(&v.wait, "wait", "", "how long to wait at most (a Go duration; default: until the barrier is lowered or a signal comes)")
}

// barrierAsk is the longest single wait of `barrier wait` asks the sidecar
// for (whose --max-wait is 5m by default): a longer wait is asked again.
const barrierAsk = time.Minute

// barrierWait waits until the barrier is lowered (exit 0): in requests of up
// to barrierAsk, asked again while --wait lasts (75 once it ended first). A
// sidecar not reached at the first request is 69 at once; one that goes
// away later (restarting) is asked again after a backoff, for up to
// kvWatchGiveUp.
func (c *cliCall) barrierWait(args []string) int {
	w := barrierWaiter{}
	if c.v.wait != "" {
		d, err := time.ParseDuration(c.v.wait)
		if err != nil || d < 0 {
			fmt.Fprintf(c.stderr, "coord-sidecar %s: --wait %q is not a duration\n", c.name, c.v.wait)
			return ExitUsage
		}
		w.deadline = time.Now().Add(d)
	}
	for {
		ask := barrierAsk
		if !w.deadline.IsZero() {
			ask = min(ask, max(time.Until(w.deadline), 0).Round(time.Millisecond))
		}
		s := ask.String()
		r, err := c.api.WaitBarrierWithResponse(c.sig.ctx, args[0], &client.WaitBarrierParams{Wait: &s})
		if err == nil && r.StatusCode() == http.StatusOK {
			return 0
		}
		status, body := 0, []byte(nil)
		if err == nil {
			status, body = r.StatusCode(), r.Body
		}
		again, pause := w.again(err, status, body)
		switch {
		case c.sig.received() != 0:
			return c.sig.exitCode()
		case !again:
			return c.failed(err, status, body) // 409 barrier-raised after --wait: 75
		}
		if sleep(c.sig.ctx, pause) != nil {
			return c.sig.exitCode()
		}
	}
}

// barrierWaiter is what barrier wait remembers across its requests.
type barrierWaiter struct {
	deadline time.Time // zero: no --wait
	b        backoff
	reached  bool      // the sidecar answered once
	failing  time.Time // since when it has not answered (zero while it does)
}

// again tells whether barrier wait asks again after an answer other than
// 200 (err, or status and body), and after what pause.
func (w *barrierWaiter) again(err error, status int, body []byte) (bool, time.Duration) {
	left := w.deadline.IsZero() || time.Until(w.deadline) > 0
	switch {
	case errors.Is(err, context.Canceled):
		return false, 0
	case status == http.StatusConflict && problemType(body) == "barrier-raised":
		w.reached, w.failing = true, time.Time{}
		w.b.reset()
		return left, 0
	case err != nil || status >= 500 || status == http.StatusTooManyRequests:
		if w.failing.IsZero() {
			w.failing = time.Now()
		}
		return left && w.reached && time.Since(w.failing) < kvWatchGiveUp, w.b.pause()
	}
	return false, 0
}

func queueTakeFlags(fs *flag.FlagSet, v *cliValues) {
	waitFlag(fs, v)
	fs.BoolVar(&v.claim, "claim", false, "claim the item instead (at least once): it comes back unless acked (queue ack) within --ttl")
	fs.StringVar(&v.ttl, "ttl", "", "with --claim: how long the claim lasts unacked (a Go duration; default: the sidecar's --default-ttl)")
}

// queueTakeCheck: --ttl goes with --claim.
func queueTakeCheck(_ []string, v *cliValues) string {
	if v.ttl != "" && !v.claim {
		return "--ttl goes with --claim"
	}
	return ""
}

// queueClaim claims the first item: a line with the claim's id, then the
// item's bytes as stored; exit 1 when the queue is empty (after --wait).
func (c *cliCall) queueClaim(args []string) int {
	params := &client.ClaimParams{}
	if c.v.wait != "" {
		params.Wait = &c.v.wait
	}
	if c.v.ttl != "" {
		params.Ttl = &c.v.ttl
	}
	r, err := c.api.ClaimWithResponse(c.sig.ctx, args[0], params)
	if err == nil && r.StatusCode() == http.StatusNoContent {
		fmt.Fprintf(c.stderr, "coord-sidecar %s: the queue %q is empty\n", c.name, args[0])
		return ExitNotFound
	}
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	fmt.Fprintln(c.stdout, r.HTTPResponse.Header.Get("Claim-Id"))
	_, _ = c.stdout.Write(r.Body)
	return 0
}

// queueAck acknowledges a claim: its item is deleted.
func (c *cliCall) queueAck(args []string) int {
	r, err := c.api.AckClaimWithResponse(c.sig.ctx, args[0], args[1])
	if code, ok := c.answered(err, http.StatusNoContent, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	return 0
}
