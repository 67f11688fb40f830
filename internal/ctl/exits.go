package ctl

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Exit codes: one table for the command-line client and the wrappers (lock,
// elect), the sysexits.h codes where one fits. ExitCodes is the table as every
// --help and the README show it; exitForStatus maps an answer to its code.
const (
	ExitNotFound    = 1  // what was asked for does not exist (as `consul kv get` exits 1)
	ExitUsage       = 64 // a usage error, or a request the sidecar refused as invalid (EX_USAGE)
	ExitConflict    = 65 // a conflict that waiting will not change (EX_DATAERR)
	ExitUnavailable = 69 // the sidecar unreachable, or unavailable (EX_UNAVAILABLE)
	ExitNotAcquired = 75 // a wait that ended: still held by another (EX_TEMPFAIL)
	ExitLeaseLost   = 76 // lost while running: the lease, lock or leadership; the command was stopped
	ExitDenied      = 77 // 401 or 403: the token missing or refused, or not allowed (EX_NOPERM)
)

// ExitRow is one row of the exit-code table.
type ExitRow struct {
	Code    string
	Meaning string
}

// ExitCodes is the exit-code table of the client and the wrappers, in order.
var ExitCodes = []ExitRow{
	{"0", "success (and `--help`)"},
	{"1", "not found (404): a missing key, lease or member; an empty `queue take`; no instance for `service pick`"},
	{"64", "a usage error (stderr says why), or a request the sidecar refuses as invalid: 400, 413 (too large), any 4xx not named here"},
	{"65", "a conflict that waiting will not change (409: a version or value mismatch, a counter overflow, an id in use)"},
	{"69", "the sidecar unreachable, or unavailable (503, 429, any 5xx); `status`: the session not `connected`"},
	{"75", "a wait that ended with the lock (semaphore, barrier) still held by another (409 lock-held)"},
	{"76", "lost while the command ran (the lease, the lock, the leadership): the command was stopped"},
	{"77", "401 (the token missing or wrong: COORD_TOKEN, COORD_TOKEN_FILE) or 403 (not allowed)"},
	{"N", "a wrapped command's own exit code"},
	{"128+N", "ended by signal N (the wrapped command killed by it, or the wrapper interrupted)"},
}

// ExitTableMarkdown is ExitCodes as the README's Markdown table.
func ExitTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| exit code | meaning |\n|---|---|\n")
	for _, r := range ExitCodes {
		fmt.Fprintf(&b, "| `%s` | %s |\n", r.Code, r.Meaning)
	}
	return b.String()
}

// exitTableText is ExitCodes as every --help ends, with how to reach the
// sidecar and give it a token.
func exitTableText() string {
	var b strings.Builder
	b.WriteString("Exit codes (the same for every verb and wrapper):\n")
	for _, r := range ExitCodes {
		fmt.Fprintf(&b, "  %-6s %s\n", r.Code, strings.ReplaceAll(r.Meaning, "`", ""))
	}
	b.WriteString("The sidecar: --addr or COORD_ADDR; its token: --token or COORD_TOKEN, or --token-file or COORD_TOKEN_FILE.")
	return b.String()
}

// waitEnded are the 409 problems of a wait that ended with the thing still
// held (exit 75); every other 409 is a conflict (65).
var waitEnded = map[string]bool{
	"lock-held": true, "semaphore-full": true,
	"barrier-raised": true, "barrier-not-ready": true, "barrier-not-empty": true,
}

// exitForStatus is the exit code of an answer with status (problem: the
// problem document's type name, when any).
func exitForStatus(status int, problem string) int {
	switch {
	case status == http.StatusNotFound:
		return ExitNotFound
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ExitDenied
	case status == http.StatusConflict && waitEnded[problem]:
		return ExitNotAcquired
	case status == http.StatusConflict:
		return ExitConflict
	case status == http.StatusTooManyRequests || status >= 500:
		return ExitUnavailable
	case status >= 400:
		return ExitUsage
	}
	return ExitUnavailable // an answer the client did not expect
}

// exitFor is the exit code of a failed call: an *apiError's status, else
// (the sidecar not reached, or its answer broken) ExitUnavailable.
func exitFor(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return exitForStatus(ae.Status, ae.problem())
	}
	return ExitUnavailable
}

// deniedHint says, after a 401, whether the token was missing or refused,
// and where one is given; "" for any other status.
func deniedHint(status int, hadToken bool) string {
	if status != http.StatusUnauthorized {
		return ""
	}
	if hadToken {
		return " (the token given was refused: check COORD_TOKEN, --token or the --token-file / COORD_TOKEN_FILE)"
	}
	return " (no token was given: set COORD_TOKEN, or pass --token or --token-file / COORD_TOKEN_FILE)"
}
