package ctl

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// The semaphore and rwlock wrappers: runHeld (held.go) with their own way
// to acquire and release.

// RunSemaphore implements `coord-sidecar semaphore NAME --max N [flags] --
// COMMAND ARGS...` (semaphoreUsage): the lock wrapper's behaviour, holding
// one of N permits.
func RunSemaphore(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var maxPermits int
	return runHeld(sig, args, getenv, stdout, stderr, heldKind{
		name: "semaphore", what: "a permit", usage: semaphoreUsage, heldBy: holdersOf,
		flags: func(fs *flag.FlagSet) func() string {
			fs.IntVar(&maxPermits, "max", 0, "the most permits held at once, at least 1 (required; every party gives the same)")
			return func() string {
				if maxPermits < 1 {
					return "--max N (at least 1) is required"
				}
				return ""
			}
		},
		acquire: func(ctx context.Context, c *apiClient, name string, q url.Values) (holding, error) {
			q.Set("max", strconv.Itoa(maxPermits))
			var permit struct {
				Permit string `json:"permit"`
			}
			err := c.call(ctx, http.MethodPost, "/v1/semaphores/"+url.PathEscape(name)+"/permits", q, nil, &permit)
			return holding{
				env:     []string{"COORD_PERMIT=" + permit.Permit},
				release: "/v1/semaphores/" + url.PathEscape(name) + "/permits/" + url.PathEscape(permit.Permit),
				query:   url.Values{"lease": q["lease"]},
			}, err
		},
	})
}

// RunRWLock implements `coord-sidecar rwlock NAME --read|--write [flags] --
// COMMAND ARGS...` (rwlockUsage): the lock wrapper's behaviour, holding the
// read/write lock in one mode.
func RunRWLock(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	var read, write bool
	mode := func() string {
		if read {
			return "read"
		}
		return "write"
	}
	return runHeld(sig, args, getenv, stdout, stderr, heldKind{
		name: "rwlock", what: "the lock", usage: rwlockUsage, heldBy: rwHolders,
		flags: func(fs *flag.FlagSet) func() string {
			fs.BoolVar(&read, "read", false, "hold it shared with other readers")
			fs.BoolVar(&write, "write", false, "hold it alone")
			return func() string {
				if read == write {
					return "one of --read and --write is required"
				}
				return ""
			}
		},
		acquire: func(ctx context.Context, c *apiClient, name string, q url.Values) (holding, error) {
			q.Set("mode", mode())
			path := "/v1/rwlocks/" + url.PathEscape(name)
			var grant struct {
				FencingToken int64 `json:"fencingToken"`
			}
			err := c.call(ctx, http.MethodPost, path, q, nil, &grant)
			return holding{
				env:     []string{"COORD_FENCING_TOKEN=" + strconv.FormatInt(grant.FencingToken, 10)},
				release: path, query: url.Values{"lease": q["lease"], "mode": {mode()}},
			}, err
		},
	})
}

// holdersOf names the holders a semaphore-full problem carries.
func holdersOf(ae *apiError) string {
	hs, _ := ae.Problem["holders"].([]any)
	var owners []string
	for _, h := range hs {
		if m, ok := h.(map[string]any); ok {
			owners = append(owners, fmt.Sprint(m["owner"]))
		}
	}
	if len(owners) == 0 {
		return "every permit held"
	}
	return "every permit held, by " + strings.Join(owners, ", ")
}

// rwHolders names the writer or readers a lock-held problem of a read/write
// lock carries.
func rwHolders(ae *apiError) string {
	if w, ok := ae.Problem["writer"].(map[string]any); ok {
		return fmt.Sprintf("written by %v (fencing token %v, since %v)", w["owner"], w["fencingToken"], w["since"])
	}
	rs, _ := ae.Problem["readers"].([]any)
	var owners []string
	for _, r := range rs {
		if m, ok := r.(map[string]any); ok {
			owners = append(owners, fmt.Sprint(m["owner"]))
		}
	}
	if len(owners) == 0 {
		return "a writer waits before this one"
	}
	return "read by " + strings.Join(owners, ", ")
}

const (
	semaphoreUsage = `semaphore NAME --max N [flags] -- COMMAND ARGS...

Takes one of the N permits of the semaphore NAME (waiting up to --wait; every
party gives the same --max, as in Curator's InterProcessSemaphoreV2, whose
processes share it), runs COMMAND with COORD_PERMIT and COORD_LEASE in its
environment while the lease lives, releases the permit when COMMAND exits and
exits with its code: at most N commands run at once. Everything else is as the
lock wrapper does it (coord-sidecar lock --help): signals passed on (exit
128+N), a restart of the sidecar or a suspension of its session ridden
through. It exits 75 when no permit came within --wait, 76 when the lease (or
the permit) was lost while COMMAND ran: COMMAND was stopped; 65 when --max is
not the semaphore's.`
	rwlockUsage = `rwlock NAME --read|--write [flags] -- COMMAND ARGS...

Takes the read/write lock NAME in read mode (shared with other readers) or
write mode (alone), waiting up to --wait (fair: a waiting writer holds back
the readers that came after it; Curator's InterProcessReadWriteLock shares
it), runs COMMAND with COORD_FENCING_TOKEN and COORD_LEASE in its environment
while the lease lives, releases the lock when COMMAND exits and exits with its
code. Everything else is as the lock wrapper does it (coord-sidecar lock
--help): signals passed on (exit 128+N), a restart of the sidecar or a
suspension of its session ridden through. It exits 75 when the lock was not
acquired within --wait, 76 when the lease (or the lock) was lost while COMMAND
ran: COMMAND was stopped.`
)
