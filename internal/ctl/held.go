package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The wrappers that hold one thing while their command runs: `lock`,
// `semaphore` (a permit), `rwlock` (read or write), `group join` (a
// membership) and `service register` (an instance). They share runHeld:
// a lease kept alive (lease.go), the thing acquired on it (waiting up to
// --wait, asked again while the sidecar restarts), the command supervised
// and stopped when the lease is lost (76), the thing released after.

// heldKind is what tells one such wrapper from another.
type heldKind struct {
	name string // the subcommand: "lock"
	what string // what --wait waits for: "the lock"
	// usage is the --help text (its first line the usage line).
	usage string
	// flags registers the kind's own flags and returns the check of their
	// values after parsing ("" when they are right; nil: nothing to check).
	flags func(fs *flag.FlagSet) func() string
	// acquire asks once for the thing NAME with q (lease, wait and owner in
	// it), and tells how to release it and what the command's environment
	// gets.
	acquire func(ctx context.Context, c *apiClient, name string, q url.Values) (holding, error)
	// heldBy says who holds the thing after a 409 of a wait that ended.
	heldBy func(ae *apiError) string
	// noWait: the thing is had at once or not at all (a group's member, a
	// service's instance):
	// no --wait, no --owner, and q holds the lease only.
	noWait bool
}

// holding is a thing acquired.
type holding struct {
	env     []string   // for the command's environment, besides COORD_LEASE
	release string     // the path of the DELETE that releases it
	query   url.Values // that DELETE's query
}

// Wrappers are the subcommands that are not the command-line client's
// groups, by name: `coord-sidecar NAME ARGS...` runs Wrappers[NAME] with ARGS.
var Wrappers = map[string]func(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int{
	"lock":      RunLock,
	"elect":     RunElect,
	"semaphore": RunSemaphore,
	"rwlock":    RunRWLock,
}

// RunLock implements `coord-sidecar lock NAME [flags] -- COMMAND ARGS...`: it takes
// the lock, runs the child with COORD_FENCING_TOKEN and COORD_LEASE while the lease
// lives, releases when the child exits and exits with the child's code. A lost
// lease stops the child at once (SIGTERM, then SIGKILL after --grace) and exits 76;
// not acquired within --wait exits 75. An end signal is passed on to the child;
// once it has exited the lock is released and the wrapper exits 128+N.
func RunLock(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return runHeld(sig, args, getenv, stdout, stderr, heldKind{
		name: "lock", what: "the lock", usage: lockUsage, heldBy: heldBy,
		acquire: func(ctx context.Context, c *apiClient, name string, q url.Values) (holding, error) {
			path := "/v1/locks/" + url.PathEscape(name)
			var grant struct {
				FencingToken int64 `json:"fencingToken"`
			}
			err := c.call(ctx, http.MethodPost, path, q, nil, &grant)
			return holding{
				env:     []string{"COORD_FENCING_TOKEN=" + strconv.FormatInt(grant.FencingToken, 10)},
				release: path, query: url.Values{"lease": q["lease"]},
			}, err
		},
	})
}

// runHeld runs a wrapper of kind k (see heldKind): exit codes as RunLock's.
func runHeld(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer, k heldKind) int {
	prefix := "coord-sidecar " + k.name + ":"
	fs := flag.NewFlagSet("coord-sidecar "+k.name, flag.ContinueOnError)
	o := wrapOptions{stderr: stderr}
	o.register(fs, getenv)
	wait, owner, check := k.register(fs)
	name, command, code, ok := parseWrapArgs(fs, args, k.usage, stdout, stderr)
	if !ok {
		return code
	}
	if check != nil {
		if why := check(); why != "" {
			fmt.Fprintf(stderr, "%s %s\nusage: coord-sidecar %s\n(coord-sidecar %s --help lists the flags)\n", prefix, why, firstLine(k.usage), k.name)
			return ExitUsage
		}
	}
	c, code := o.client(k.name)
	if c == nil {
		return code
	}
	lease, err := c.keepLease(sig.ctx, o.ttl)
	if err != nil {
		return c.unavailable(sig, stderr, prefix, err, nil)
	}
	defer lease.Close() // revokes: a thing granted as a signal came is released too
	h, err := c.acquireHeld(sig.ctx, lease, *wait, func(ctx context.Context, left time.Duration) (holding, error) {
		q := url.Values{"lease": {lease.ID}}
		if !k.noWait {
			q.Set("wait", left.String())
			q.Set("owner", *owner)
		}
		return k.acquire(ctx, c, name, q)
	})
	if err != nil {
		return k.notAcquired(sig, c, stderr, name, *wait, err)
	}
	out := o.supervise(sig, command, append(h.env, "COORD_LEASE="+lease.ID), lease.Lost)
	if out.stop != nil { // the lease was lost before any signal came
		fmt.Fprintf(stderr, "%s %s while the command ran; it was stopped\n", prefix, lease.why)
		return ExitLeaseLost
	}
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.callRetrying(rctx, http.MethodDelete, h.release, h.query, nil, nil); err != nil {
		fmt.Fprintln(stderr, prefix, "release:", err)
	}
	if sig.received() != 0 {
		return sig.exitCode()
	}
	return out.code
}

// register registers the flags of the kind besides the connection's and
// the lease's: --wait and --owner (unless noWait), and the kind's own (check
// checks them once parsed; nil when nothing is to check).
func (k heldKind) register(fs *flag.FlagSet) (wait *time.Duration, owner *string, check func() string) {
	wait, owner = new(time.Duration), new(string)
	if !k.noWait {
		fs.DurationVar(wait, "wait", 30*time.Second, "how long to wait for "+k.what)
		fs.StringVar(owner, "owner", defaultOwner(), "owner shown to others as the holder")
	}
	if k.flags != nil {
		check = k.flags(fs)
	}
	return wait, owner, check
}

// notAcquired is the exit code when acquiring failed with err: 128+N after a
// signal, 75 when the wait ended with the thing held by another (stderr names
// the holder), else the table's code for err.
func (k heldKind) notAcquired(sig *Signals, c *apiClient, stderr io.Writer, name string, wait time.Duration, err error) int {
	if sig.received() != 0 {
		return sig.exitCode()
	}
	var ae *apiError
	if errors.As(err, &ae) && exitFor(err) == ExitNotAcquired {
		who := ae.Error()
		if k.heldBy != nil {
			who = k.heldBy(ae)
		}
		fmt.Fprintf(stderr, "coord-sidecar %s: %q not acquired within %s: %s\n", k.name, name, wait, who)
		return ExitNotAcquired
	}
	return c.unavailable(sig, stderr, "coord-sidecar "+k.name+":", err, nil)
}

// acquireHeld asks for a thing on lease (once), waiting up to wait. A
// request the sidecar could not answer (it restarted meanwhile: the
// connection refused or broken, a waiting request answered 503) is made
// again, for what is left of wait, while the lease lives; asking again is
// safe, as a lease that holds the thing is given its grant again.
func (c *apiClient) acquireHeld(ctx context.Context, lease *leaseKeeper, wait time.Duration, ask func(ctx context.Context, left time.Duration) (holding, error)) (holding, error) {
	ctx, cancel := lease.untilLost(ctx)
	defer cancel()
	deadline := time.Now().Add(wait)
	var b backoff
	for {
		left := max(time.Until(deadline), 0).Round(time.Millisecond)
		h, err := ask(ctx, left)
		if err == nil {
			return h, nil
		}
		if !retryable(err) || time.Until(deadline) <= 0 || isClosed(lease.Lost) {
			return holding{}, err
		}
		if sleep(ctx, b.pause()) != nil {
			return holding{}, err
		}
	}
}
