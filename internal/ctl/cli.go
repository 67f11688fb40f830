package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api/client"
	"github.com/coord-sidecar/coord-sidecar/sse"
)

// The command-line client: `coord-sidecar kv get K` and the other verbs of
// cliVerbs, each one or two calls of the generated client (api/client) over the
// connection the wrappers use (--addr in parseAddr's forms, TLS and token:
// transport.go).
//
// Exit codes: the one table of exits.go, shared with the wrappers.

// cliVerb is one verb of the command-line client.
type cliVerb struct {
	args  string // the positional arguments, as --help shows them
	min   int    // positional arguments at least
	max   int    // and at most
	about string // what it does, for --help
	flags func(fs *flag.FlagSet, v *cliValues)
	// check, when set, says what is wrong with the arguments and flags
	// together ("" when nothing is): a usage error.
	check func(args []string, v *cliValues) string
	run   func(c *cliCall, args []string) int
}

// cliValues holds the verb-specific flags.
type cliValues struct {
	contentType string
	json        bool
	wait        string
	priority    int
	strategy    string
	once        bool   // lease keepalive --once
	prefix      string // lease list, kv get --prefix
	lease       string // kv put --lease
	version     string // kv put --version ("" when not given)
	claim       bool   // queue take --claim
	ttl         string // queue take --claim --ttl
	pageSize    int    // the lists' page size (0: the sidecar's)
	prefixSet   bool   // kv get --prefix was given (maybe "")
}

// cliVerbs are the verbs, by "GROUP VERB" ("status" alone).
var cliVerbs = map[string]cliVerb{
	"kv get": {args: "KEY | --prefix P", min: 0, max: 1, run: (*cliCall).kvGet, flags: kvGetFlags, check: kvGetCheck,
		about: `Writes the key's value to stdout, its bytes as stored (no newline added).
With --prefix P instead of KEY: every key that starts with P, in name order (every
page of GET /v1/kv?prefix=), each as a line with the key, then the value's bytes
and a newline (as etcdctl get --prefix); nothing when there is none. With --json
each key is one line of JSON instead ({"key","version","value" or
"valueBase64","contentType"}), which keeps values holding newlines apart.`},
	"kv put": {args: "KEY [VALUE]", min: 1, max: 2, run: (*cliCall).kvPut, flags: kvPutFlags, check: kvPutCheck,
		about: `Writes VALUE (without it: stdin, to its end) as the key's value. With --version V
it writes only if the key's version is V (-1: only if the key is absent), a
compare-and-set: otherwise nothing is written and it exits 65. With --lease ID the
key is ephemeral: deleted when the lease ends (it must be absent, or the lease's).`},
	"kv delete": {args: "KEY", min: 1, max: 1, run: (*cliCall).kvDelete,
		about: "Deletes the key."},
	"kv watch": {args: "KEY | --prefix P", min: 0, max: 1, run: (*cliCall).kvWatch, flags: kvWatchFlags, check: kvWatchCheck,
		about: `Follows the key's event stream until interrupted: its value now, then every
change, each written to stdout as the value's bytes followed by a newline (a key
that is absent, or deleted, writes nothing). With --json each state is one line of
JSON instead ({"key","version","value" or "valueBase64","contentType","deleted"}),
which keeps values holding newlines apart and shows deletions.
With --prefix P instead of KEY: every key that starts with P as it is now, then
every change under P (GET /v1/kv/events?prefix=), each as a line with the key, then
the value's bytes and a newline (as kv get --prefix; a deletion writes nothing), or
with --json one line of JSON per state, deletions included. Through a restart of
the sidecar either form opens its stream again with the last event id (stderr says
so) and writes a key's state only if it changed.`},
	"counter get": {args: "NAME", min: 1, max: 1, run: (*cliCall).counterGet,
		about: "Writes the counter's value (0 when never set), a signed 64-bit integer."},
	"counter add": {args: "NAME [DELTA]", min: 1, max: 2, run: (*cliCall).counterAdd,
		about: "Adds DELTA (default 1, may be negative) atomically; writes the value right after this add."},
	"queue put": {args: "QUEUE [ITEM]", min: 1, max: 2, run: (*cliCall).queuePut, flags: queuePutFlags,
		about: "Enqueues ITEM (without it: stdin, to its end)."},
	"queue take": {args: "QUEUE", min: 1, max: 1, run: (*cliCall).queueTake, flags: queueTakeFlags, check: queueTakeCheck,
		about: `Takes the first item and writes its bytes to stdout as stored; exits 1 when the
queue is empty (after --wait). With --claim it claims the item instead (at least
once: it is hidden, and comes back to its place unless acked within --ttl) and
writes a line with the claim's id, then the item's bytes as stored; acknowledge
it with: coord-sidecar queue ack QUEUE CLAIM.`},
	"queue ack": {args: "QUEUE CLAIM", min: 2, max: 2, run: (*cliCall).queueAck,
		about: "Acknowledges the claim (of queue take --claim): its item is deleted. Exits 1 when the claim is gone (acked, or expired: the item is back)."},
	"barrier wait": {args: "NAME", min: 1, max: 1, run: (*cliCall).barrierWait, flags: barrierWaitFlag,
		about: `Returns (exit 0) once the barrier NAME is lowered, at once when it is not raised;
exits 75 when --wait ends first, 128+N on a signal. Through a restart of the
sidecar it asks again.`},
	"lease grant": {args: "TTL", min: 1, max: 1, run: (*cliCall).leaseGrant,
		about: "Grants a lease of TTL (a Go duration: 30s, 5m) and writes its id. It expires unless kept alive within TTL."},
	"lease keepalive": {args: "ID", min: 1, max: 1, run: (*cliCall).leaseKeepalive, flags: onceFlag,
		about: `Keeps the lease alive until interrupted (SIGINT, SIGTERM: exit 128+N): pushes its
expiry to now + its ttl three times per ttl, and writes the lease as one line of
JSON ({"lease","ttl","expiresAt"}) after each keepalive, its new expiry. Through
a restart of the sidecar it tries again (stderr says so) until the lease's ttl
has passed since the last keepalive answered; exits 1 once the lease is gone.
With --once it pushes the expiry once, writes the lease and exits.`},
	"lease list": {run: (*cliCall).leaseList, flags: leaseListFlags,
		about: `Writes the caller's leases (those of its token; without tokens every lease), one
line of JSON each in id order ({"lease","ttl","expiresAt","holds"}, as GET
/v1/leases lists them, every page); nothing when there are none.`},
	"lease revoke": {args: "ID", min: 1, max: 1, run: (*cliCall).leaseRevoke,
		about: "Revokes the lease; everything it holds is released before this returns."},
	"service list": {args: "SERVICE", min: 1, max: 1, run: (*cliCall).serviceList,
		about: `Writes the service's live instances, one line of JSON each in registration order
({"id","address","port","sslPort","payload","uriSpec","registeredAt","enabled"}, as
GET /v1/services/{service} lists them; a Curator ServiceDiscovery's instances too);
nothing when it has none.`},
	"service pick": {args: "SERVICE", min: 1, max: 1, run: (*cliCall).servicePick, flags: strategyFlag,
		about: `Writes one enabled instance of the service as one line of JSON (as service list
writes it), chosen by --strategy; exits 1 when the service has no enabled instance.
round-robin and sticky keep their place in the sidecar, across calls.`},
	"status": {run: (*cliCall).status,
		about: "Writes the sidecar's ZooKeeper session as JSON; exits 69 unless its state is connected."},
}

func contentTypeFlag(fs *flag.FlagSet, v *cliValues) {
	fs.StringVar(&v.contentType, "content-type", "application/octet-stream", "the Content-Type stored with the bytes")
}

func queuePutFlags(fs *flag.FlagSet, v *cliValues) {
	contentTypeFlag(fs, v)
	fs.IntVar(&v.priority, "priority", 0, "0..99, lower first")
}

func jsonFlag(fs *flag.FlagSet, v *cliValues) {
	fs.BoolVar(&v.json, "json", false, "write each state as one line of JSON")
}

func waitFlag(fs *flag.FlagSet, v *cliValues) {
	fs.StringVar(&v.wait, "wait", "", "how long to wait for an item (a Go duration; default: try once)")
}

// cliWrappers are the verbs of the client's groups that wrap a command
// (wrap.go's kind: run while held), by "GROUP VERB", with their arguments as
// the verb list shows them.
var cliWrappers = map[string]struct {
	args string
	run  func(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int
}{
	"service register": {"SERVICE --id ID --address A [--port P] -- COMMAND ARGS...", RunServiceRegister},
	"group join":       {"NAME --id ID [--value V] -- COMMAND ARGS...", RunGroupJoin},
}

func strategyFlag(fs *flag.FlagSet, v *cliValues) {
	fs.StringVar(&v.strategy, "strategy", "random", "random, round-robin or sticky (the same instance while it lives)")
}

// IsCLIGroup tells whether `coord-sidecar WORD ...` is the command-line client.
func IsCLIGroup(word string) bool {
	for k := range cliVerbs {
		if g, _, _ := strings.Cut(k, " "); g == word {
			return true
		}
	}
	for k := range cliWrappers {
		if g, _, _ := strings.Cut(k, " "); g == word {
			return true
		}
	}
	return false
}

// RunCLI runs `coord-sidecar GROUP VERB [flags] ARGS...` (args starts with
// GROUP) and returns its exit code.
func RunCLI(sig *Signals, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	name, rest, code, ok := cliVerbName(args, stdout, stderr)
	if !ok {
		return code
	}
	if w, ok := cliWrappers[name]; ok {
		return w.run(sig, rest, getenv, stdout, stderr)
	}
	verb := cliVerbs[name]
	fs := flag.NewFlagSet("coord-sidecar "+name, flag.ContinueOnError)
	o := wrapOptions{stderr: stderr}
	o.registerConnection(fs, getenv)
	var v cliValues
	if verb.flags != nil {
		verb.flags(fs, &v)
	}
	positional, code, ok := parseCLIArgs(fs, rest, verb, stdout, stderr)
	if !ok {
		return code
	}
	if verb.check != nil {
		if why := verb.check(positional, &v); why != "" {
			_, code, _ := cliUsage(stderr, fs.Name(), verbUsageLine(fs, verb), why)
			return code
		}
	}
	c, code := o.client(name)
	if c == nil {
		return code
	}
	call := &cliCall{sig: sig, name: name, api: c.generated(), hasToken: c.token != "", v: v, stdin: stdin, stdout: stdout, stderr: stderr}
	return verb.run(call, positional)
}

// cliVerbName finds the verb of args ("kv get", or "status"); without one it
// lists the group's verbs (to stdout after --help, exit 0; else to stderr, 64).
func cliVerbName(args []string, stdout, stderr io.Writer) (name string, rest []string, code int, ok bool) {
	group := args[0]
	if _, ok := cliVerbs[group]; ok {
		return group, args[1:], 0, true
	}
	if len(args) > 1 {
		if _, ok := cliVerbs[group+" "+args[1]]; ok {
			return group + " " + args[1], args[2:], 0, true
		}
		if _, ok := cliWrappers[group+" "+args[1]]; ok {
			return group + " " + args[1], args[2:], 0, true
		}
	}
	w, code := stderr, ExitUsage
	if len(args) > 1 && (args[1] == "--help" || args[1] == "-h" || args[1] == "help") {
		w, code = stdout, 0
	} else if len(args) > 1 {
		fmt.Fprintf(stderr, "coord-sidecar %s: no verb %q\n", group, args[1])
	}
	fmt.Fprintf(w, "usage:\n%s\n'coord-sidecar %s VERB --help' describes a verb and its flags.\n\n%s\n", VerbList(group), group, exitTableText())
	return "", nil, code, false
}

// VerbList is one usage line per verb of group ("" for every group).
func VerbList(group string) string {
	var lines []string
	add := func(verb, args string) {
		if g, _, _ := strings.Cut(verb, " "); group == "" || g == group {
			lines = append(lines, "  "+strings.TrimSpace(fmt.Sprintf("coord-sidecar %s [flags] %s", verb, args)))
		}
	}
	for k, v := range cliVerbs {
		add(k, v.args)
	}
	for k, w := range cliWrappers {
		add(k, w.args)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// parseCLIArgs parses flags and positional arguments in any order; a word that
// is a negative number (a DELTA) is an argument, and everything after `--` is.
// When ok is false the verb is over with code: 0 after --help (the usage went
// to stdout), 64 on a usage error (the reason and the usage line on stderr).
func parseCLIArgs(fs *flag.FlagSet, args []string, verb cliVerb, stdout, stderr io.Writer) (positional []string, code int, ok bool) {
	usageLine := verbUsageLine(fs, verb)
	fs.SetOutput(stderr)
	fs.Usage = func() {}
	for len(args) > 0 {
		if isNegativeNumber(args[0]) {
			positional, args = append(positional, args[0]), args[1:]
			continue
		}
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprintf(stdout, "usage: %s\n\n%s\n\n%s\n\nflags:\n", usageLine, verb.about, exitTableText())
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				return nil, 0, false
			}
			return cliUsage(stderr, fs.Name(), usageLine, "")
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			positional = append(positional, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
	if len(positional) < verb.min || len(positional) > verb.max {
		return cliUsage(stderr, fs.Name(), usageLine, fmt.Sprintf("want %s, got %d argument(s)", orNone(verb.args), len(positional)))
	}
	return positional, 0, true
}

// verbUsageLine is the verb's usage line.
func verbUsageLine(fs *flag.FlagSet, verb cliVerb) string {
	return strings.TrimSpace(fmt.Sprintf("%s [flags] %s", fs.Name(), verb.args))
}

// cliUsage tells a usage error (why, when known) and the usage line.
func cliUsage(stderr io.Writer, prog, usageLine, why string) ([]string, int, bool) {
	if why != "" {
		fmt.Fprintf(stderr, "%s: %s\n", prog, why)
	}
	fmt.Fprintf(stderr, "usage: %s\n(%s --help describes it)\n", usageLine, prog)
	return nil, ExitUsage, false
}

func orNone(args string) string {
	if args == "" {
		return "no arguments"
	}
	return args
}

func isNegativeNumber(s string) bool {
	_, err := strconv.ParseInt(s, 10, 64)
	return err == nil && strings.HasPrefix(s, "-")
}

// generated is the generated API client over c's connection and token.
func (c *apiClient) generated() *client.ClientWithResponses {
	// NewClient fails only on an unparsable server URL; c.base was parsed by parseAddr.
	raw, err := client.NewClient(c.base, client.WithHTTPClient(c.http),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			c.authorize(req)
			return nil
		}))
	if err != nil {
		panic(fmt.Sprintf("generated client for %q: %v", c.base, err))
	}
	return &client.ClientWithResponses{ClientInterface: raw}
}

// cliCall is one run of a verb.
type cliCall struct {
	sig            *Signals
	name           string // "kv get"
	api            *client.ClientWithResponses
	hasToken       bool // a token was given (a 401 then says it was refused)
	v              cliValues
	stdin          io.Reader
	stdout, stderr io.Writer
}

// failed tells why a call did not succeed and returns the exit code: the
// transport's error (69, or 128+N after a signal), or the problem's detail
// and the code of the one table (exitForStatus).
func (c *cliCall) failed(err error, status int, body []byte) int {
	if err != nil {
		if c.sig.received() != 0 {
			return c.sig.exitCode()
		}
		fmt.Fprintf(c.stderr, "coord-sidecar %s: %v\n", c.name, err)
		return ExitUnavailable
	}
	fmt.Fprintf(c.stderr, "coord-sidecar %s: %s%s\n", c.name, problemDetail(status, body), deniedHint(status, c.hasToken))
	return exitForStatus(status, problemType(body))
}

// problemType is the name of a problem document's type ("" when none).
func problemType(body []byte) string {
	var p client.Problem
	if json.Unmarshal(body, &p) != nil {
		return ""
	}
	return p.Type[strings.LastIndex(p.Type, "/")+1:]
}

// answered checks one generated call: ok when it was made and answered want;
// otherwise the exit code failed gives (answer is read only when err is nil:
// the generated response is nil then).
func (c *cliCall) answered(err error, want int, answer func() (int, []byte)) (code int, ok bool) {
	if err != nil {
		return c.failed(err, 0, nil), false
	}
	if status, body := answer(); status != want {
		return c.failed(nil, status, body), false
	}
	return 0, true
}

// problemDetail is the problem document's detail (or title), else the status.
func problemDetail(status int, body []byte) string {
	var p client.Problem
	if json.Unmarshal(body, &p) == nil {
		if p.Detail != nil && *p.Detail != "" {
			return *p.Detail
		}
		if p.Title != "" {
			return p.Title
		}
	}
	return fmt.Sprintf("%d %s", status, http.StatusText(status))
}

// input is the value argument at i, or stdin to its end without one.
func (c *cliCall) input(args []string, i int) ([]byte, error) {
	if len(args) > i {
		return []byte(args[i]), nil
	}
	b, err := io.ReadAll(c.stdin)
	if err != nil {
		return nil, fmt.Errorf("stdin: %w", err)
	}
	return b, nil
}

// jsonLine writes a JSON answer as one line.
func (c *cliCall) jsonLine(body []byte) {
	_, _ = c.stdout.Write(append(bytes.TrimSpace(body), '\n'))
}

func (c *cliCall) kvDelete(args []string) int {
	r, err := c.api.DeleteKeyWithResponse(c.sig.ctx, args[0], nil)
	if code, ok := c.answered(err, http.StatusNoContent, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	return 0
}

// kvWatchGiveUp is how long `kv watch` tries to open its stream again after
// it broke before it gives up (exit 69): longer than a restart of the
// sidecar takes.
const kvWatchGiveUp = time.Minute

// kvWatch follows GET /v1/kv/{key}/events until a signal (exit 128+N). A
// stream that breaks (the sidecar restarting: kill -USR2, or kill -9 and a
// successor on the same --state-dir) is opened again, with Last-Event-ID,
// after a backoff of 50 ms doubling to 1 s; the state it starts with is
// written only when it differs from the last one written, so a restart
// writes nothing by itself. It exits 69 when the sidecar is not reached again
// within kvWatchGiveUp, and as the first open would (1 for 404, 64 for 400,
// else 69) when the sidecar answers a reopening with a problem.
func (c *cliCall) kvWatch(args []string) int {
	key := ""
	if len(args) > 0 {
		key = args[0]
	}
	body, status, raw, err := c.openKeyStream(key, "")
	if err != nil || status != http.StatusOK {
		return c.failed(err, status, raw)
	}
	w := keyWatch{shown: map[string][]byte{}}
	for {
		broke, err := c.readKeyStream(body, &w)
		if err != nil {
			return c.failed(err, 0, nil)
		}
		if c.sig.received() != 0 {
			return c.sig.exitCode()
		}
		fmt.Fprintf(c.stderr, "coord-sidecar %s: the stream ended (%v); opening it again\n", c.name, broke)
		var code int
		if body, code = c.reopenKeyStream(key, &w); body == nil {
			return code
		}
	}
}

// keyWatch is what `kv watch` remembers across its streams.
type keyWatch struct {
	lastID  string // the last event id received: Last-Event-ID of the next stream
	last    []byte // the data of the last state written
	written bool   // a state was written
	// shown is, with --prefix, the data of the last state written of each key.
	shown map[string][]byte
}

// openKeyStream opens the key's event stream, or with --prefix the prefix
// stream (with Last-Event-ID lastID, unless empty): its body when the answer
// is 200, else the answer's status and body, or the transport's error.
func (c *cliCall) openKeyStream(key, lastID string) (io.ReadCloser, int, []byte, error) {
	resp, err := c.requestKeyStream(key, lastID)
	if err != nil {
		return nil, 0, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, b, nil
	}
	return resp.Body, http.StatusOK, nil, nil
}

// requestKeyStream sends the stream's request.
func (c *cliCall) requestKeyStream(key, lastID string) (*http.Response, error) {
	withID := func(_ context.Context, req *http.Request) error {
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		return nil
	}
	if c.v.prefixSet {
		return c.api.StreamKeys(c.sig.ctx, &client.StreamKeysParams{Prefix: &c.v.prefix}, withID)
	}
	return c.api.StreamKey(c.sig.ctx, key, withID)
}

// reopenKeyStream opens the key's stream again after a break, with backoff,
// while the sidecar is unreachable or answers 5xx or 429 (restarting), for up
// to kvWatchGiveUp. Without a stream it returns the exit code.
func (c *cliCall) reopenKeyStream(key string, w *keyWatch) (io.ReadCloser, int) {
	var b backoff
	start := time.Now()
	for {
		if sleep(c.sig.ctx, b.pause()) != nil {
			return nil, c.sig.exitCode()
		}
		body, status, raw, err := c.openKeyStream(key, w.lastID)
		switch {
		case err == nil && status == http.StatusOK:
			return body, 0
		case c.sig.received() != 0:
			return nil, c.sig.exitCode()
		case err == nil && status < 500 && status != http.StatusTooManyRequests:
			return nil, c.failed(nil, status, raw)
		case time.Since(start) > kvWatchGiveUp:
			fmt.Fprintf(c.stderr, "coord-sidecar %s: the sidecar was not reached again within %s\n", c.name, kvWatchGiveUp)
			return nil, c.failed(err, status, raw)
		}
	}
}

// readKeyStream writes the states of one stream (see kvWatch) until it ends;
// broke is why it ended, err a failure to write.
func (c *cliCall) readKeyStream(body io.ReadCloser, w *keyWatch) (broke, err error) {
	defer body.Close()
	r := sse.NewReader(body)
	first := true // a stream opened again starts with the state now: maybe the last one written
	for {
		ev, err := r.Next()
		if err != nil {
			return err, nil
		}
		if ev.ID != "" {
			w.lastID = ev.ID
		}
		if ev.Name != "kv" {
			continue
		}
		if c.v.prefixSet {
			first = false
			if err := c.writePrefixState(ev.Data, w); err != nil {
				return nil, err
			}
			continue
		}
		repeat := first && w.written && bytes.Equal(ev.Data, w.last)
		first = false
		if repeat {
			continue
		}
		if err := c.writeKeyState(ev.Data); err != nil {
			return nil, err
		}
		w.last, w.written = ev.Data, true
	}
}

// writePrefixState writes one state of a key under a watched prefix, unless
// it is the last one written of that key (a stream opened again after a
// restart starts with every key's state): with --json its JSON line, else a
// line with the key, then the value's bytes and a newline (nothing for a
// deletion).
func (c *cliCall) writePrefixState(data []byte, w *keyWatch) error {
	var s client.KeyState
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("event data: %w", err)
	}
	if last, ok := w.shown[s.Key]; ok && bytes.Equal(last, data) {
		return nil
	}
	w.shown[s.Key] = data
	if c.v.json {
		c.jsonLine(data)
		return nil
	}
	value, ok := stateValue(&s)
	if !ok {
		return nil
	}
	_, err := fmt.Fprintf(c.stdout, "%s\n%s\n", s.Key, value)
	return err
}

// writeKeyState writes one state of a watched key: its JSON line with --json,
// else the value's bytes and a newline (nothing for an absent key).
func (c *cliCall) writeKeyState(data []byte) error {
	if c.v.json {
		c.jsonLine(data)
		return nil
	}
	var s client.KeyState
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("event data: %w", err)
	}
	value, ok := stateValue(&s)
	if !ok {
		return nil
	}
	_, err := c.stdout.Write(append(value, '\n'))
	return err
}

// stateValue is a key state's value as bytes, and false for a deletion (which
// prints nothing).
func stateValue(s *client.KeyState) ([]byte, bool) {
	switch {
	case s.Deleted != nil && *s.Deleted:
		return nil, false
	case s.Value != nil:
		return []byte(*s.Value), true
	case s.ValueBase64 != nil:
		return *s.ValueBase64, true
	}
	return nil, true
}

func (c *cliCall) counterGet(args []string) int {
	r, err := c.api.GetCounterWithResponse(c.sig.ctx, args[0])
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	fmt.Fprintln(c.stdout, r.JSON200.Value)
	return 0
}

func (c *cliCall) counterAdd(args []string) int {
	params := &client.AddCounterParams{}
	if len(args) > 1 {
		delta, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			fmt.Fprintf(c.stderr, "coord-sidecar %s: DELTA %q is not a signed 64-bit integer\n", c.name, args[1])
			return ExitUsage
		}
		params.Add = &delta
	}
	r, err := c.api.AddCounterWithResponse(c.sig.ctx, args[0], params)
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	fmt.Fprintln(c.stdout, r.JSON200.Value)
	return 0
}

func (c *cliCall) queuePut(args []string) int {
	item, err := c.input(args, 1)
	if err != nil {
		return c.failed(err, 0, nil)
	}
	params := &client.EnqueueParams{}
	if c.v.priority != 0 {
		params.Priority = &c.v.priority
	}
	r, err := c.api.EnqueueWithBodyWithResponse(c.sig.ctx, args[0], params, c.v.contentType, bytes.NewReader(item))
	if code, ok := c.answered(err, http.StatusCreated, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	return 0
}

func (c *cliCall) queueTake(args []string) int {
	if c.v.claim {
		return c.queueClaim(args)
	}
	params := &client.TakeParams{}
	if c.v.wait != "" {
		params.Wait = &c.v.wait
	}
	r, err := c.api.TakeWithResponse(c.sig.ctx, args[0], params)
	if err == nil && r.StatusCode() == http.StatusNoContent {
		fmt.Fprintf(c.stderr, "coord-sidecar %s: the queue %q is empty\n", c.name, args[0])
		return ExitNotFound
	}
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	_, _ = c.stdout.Write(r.Body)
	return 0
}

func (c *cliCall) leaseGrant(args []string) int {
	r, err := c.api.CreateLeaseWithResponse(c.sig.ctx, &client.CreateLeaseParams{Ttl: &args[0]})
	if code, ok := c.answered(err, http.StatusCreated, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	fmt.Fprintln(c.stdout, r.JSON201.Lease)
	return 0
}

func (c *cliCall) leaseRevoke(args []string) int {
	r, err := c.api.RevokeLeaseWithResponse(c.sig.ctx, args[0])
	if code, ok := c.answered(err, http.StatusNoContent, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	return 0
}

func (c *cliCall) status([]string) int {
	r, err := c.api.GetSessionWithResponse(c.sig.ctx)
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	c.jsonLine(r.Body)
	if r.JSON200.State != client.SessionStateConnected {
		fmt.Fprintf(c.stderr, "coord-sidecar status: the session is %s\n", r.JSON200.State)
		return ExitUnavailable
	}
	return 0
}

func (c *cliCall) serviceList(args []string) int {
	r, err := c.api.GetServiceWithResponse(c.sig.ctx, args[0], nil)
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	var svc struct {
		Instances []json.RawMessage `json:"instances"`
	}
	if err := json.Unmarshal(r.Body, &svc); err != nil {
		fmt.Fprintf(c.stderr, "coord-sidecar %s: the answer is not a service: %v\n", c.name, err)
		return ExitUnavailable
	}
	for _, in := range svc.Instances {
		c.jsonLine(in)
	}
	return 0
}

func (c *cliCall) servicePick(args []string) int {
	strategy := client.PickServiceInstanceParamsStrategy(c.v.strategy)
	r, err := c.api.PickServiceInstanceWithResponse(c.sig.ctx, args[0], &client.PickServiceInstanceParams{Strategy: &strategy})
	if code, ok := c.answered(err, http.StatusOK, func() (int, []byte) { return r.StatusCode(), r.Body }); !ok {
		return code
	}
	c.jsonLine(r.Body)
	return 0
}
