package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// wrapOptions are the flags shared by the subcommands.
type wrapOptions struct {
	addr, token string
	ttl, grace  time.Duration
	stderr      io.Writer
	transport   transportOptions // https://, unix:, --token-file: transport.go
}

func (o *wrapOptions) register(fs *flag.FlagSet, getenv func(string) string) {
	o.registerConnection(fs, getenv)
	fs.DurationVar(&o.ttl, "ttl", 15*time.Second, "lease ttl; the wrapper keeps the lease alive through its stream")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "time between stopping the command (SIGTERM, or the signal passed on) and SIGKILL")
}

// registerConnection registers the flags that say how to reach the sidecar
// (--addr, --token and transport.go's), shared by the wrappers and the
// command-line client.
func (o *wrapOptions) registerConnection(fs *flag.FlagSet, getenv func(string) string) {
	addr := getenv("COORD_ADDR")
	if addr == "" {
		addr = "http://127.0.0.1:8080"
	}
	fs.StringVar(&o.addr, "addr", addr,
		"the running sidecar: http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH (COORD_ADDR)")
	fs.StringVar(&o.token, "token", getenv("COORD_TOKEN"), "bearer token of the sidecar (COORD_TOKEN)")
	o.transport.register(fs, getenv)
}

// EndSignals are the signals that end a wrapper: each is passed on to the
// command, and the wrapper then exits 128+N (N the first one's number).
var EndSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}

// Signals is what a wrapper does with the end signals it receives: the first one
// is remembered and ends ctx (nothing new starts: no acquire, no campaign, no
// child); every one is passed on at once to the running child's process group.
type Signals struct {
	ctx    context.Context
	cancel context.CancelFunc
	mu     sync.Mutex
	first  syscall.Signal
	child  int // process group of the running child; 0 when none runs
}

// WatchSignals starts passing on what ch delivers; its goroutine ends when ch
// is closed.
func WatchSignals(ch <-chan os.Signal) *Signals {
	ctx, cancel := context.WithCancel(context.Background())
	s := &Signals{ctx: ctx, cancel: cancel}
	go func() {
		for sig := range ch {
			if n, ok := sig.(syscall.Signal); ok {
				s.got(n)
			}
		}
	}()
	return s
}

func (s *Signals) got(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.first == 0 {
		s.first = sig
		s.cancel()
	}
	if s.child != 0 {
		_ = syscall.Kill(-s.child, sig)
	}
}

// setChild records the running child's process group (0: none runs any more).
// A child that starts after the first signal is given that signal at once.
func (s *Signals) setChild(pgid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.child = pgid
	if pgid != 0 && s.first != 0 {
		_ = syscall.Kill(-pgid, s.first)
	}
}

// received returns the first end signal received, 0 when none was.
func (s *Signals) received() syscall.Signal {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.first
}

// exitCode is 128+N for the first signal N.
func (s *Signals) exitCode() int { return 128 + int(s.received()) }

// RunElect implements `coord-sidecar elect NAME --id ID [flags] -- COMMAND ARGS...`:
// it campaigns and runs the child only while this candidate leads (with COORD_TERM
// and COORD_LEASE), stopping it on loss of leadership or of the lease. A
// suspension of the sidecar's ZooKeeper session is neither: the child keeps
// running through it, and is stopped exactly when the sidecar reports the
// leadership gone (the session could have expired: the candidacy is lost and
// the election shows no leader) or the session lost. Without --requeue it resigns and exits with the child's code
// once the child exits; with --requeue it resigns to the back of the line and runs
// the child again at its next turn, until signalled. A lost lease exits 76. An end
// signal is passed on to the child; once it has exited the candidate resigns
// (never requeued) and the wrapper exits 128+N.
func RunElect(sig *Signals, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if observeRequested(args) {
		return runElectObserve(sig, args, getenv, stdout, stderr)
	}
	fs := flag.NewFlagSet("coord-sidecar elect", flag.ContinueOnError)
	o := wrapOptions{stderr: stderr}
	o.register(fs, getenv)
	fs.Bool("observe", false, "observe instead: coord-sidecar elect --observe NAME writes each new leader's id (--observe --help)")
	id := fs.String("id", defaultOwner(), "candidate id, unique in the election (default <hostname>-<pid>)")
	value := fs.String("value", "", "value published with the candidate")
	requeue := fs.Bool("requeue", false, "take turns: after the command exits, go to the back of the line and run it again at the next turn")
	name, command, code, ok := parseWrapArgs(fs, args, electUsage, stdout, stderr)
	if !ok {
		return code
	}
	c, code := o.client("elect")
	if c == nil {
		return code
	}
	lease, err := c.keepLease(sig.ctx, o.ttl)
	if err != nil {
		return c.unavailable(sig, stderr, "coord-sidecar elect:", err, nil)
	}
	defer lease.Close() // revokes: a candidacy made as a signal came ends too
	path := "/v1/elections/" + url.PathEscape(name)
	e := &candidacy{sig: sig, o: &o, c: c, lease: lease, id: *id, candidate: path + "/candidates/" + url.PathEscape(*id)}
	q := url.Values{"lease": {lease.ID}, "id": {*id}}
	if err := c.call(sig.ctx, http.MethodPost, path+"/candidates", q, map[string]string{"value": *value}, nil); err != nil {
		return c.unavailable(sig, stderr, "coord-sidecar elect:", err, nil)
	}
	// The stream ends with this function, not with a signal: while the child
	// stops, a closed stream must not read as a loss of leadership. It is
	// opened again when it breaks (the sidecar restarting): its first event
	// then says who leads now.
	ectx, stopEvents := context.WithCancel(context.Background())
	events, err := c.follow(ectx, path+"/events", 0, nil)
	if err != nil {
		stopEvents()
		return c.unavailable(sig, stderr, "coord-sidecar elect:", err, e.resign)
	}
	defer events.Wait()
	defer stopEvents()
	return e.campaign(command, events.Events, *requeue)
}

// unavailable is how a wrapper ends after err from the sidecar: 128+N once an
// end signal has come (after undo, when there is one), otherwise err told
// after prefix and the exit code of the table (exitFor: 69 when the sidecar
// was not reached).
func (c *apiClient) unavailable(sig *Signals, stderr io.Writer, prefix string, err error, undo func()) int {
	if sig.received() != 0 {
		if undo != nil {
			undo()
		}
		return sig.exitCode()
	}
	var ae *apiError
	hint := ""
	if errors.As(err, &ae) {
		hint = deniedHint(ae.Status, c.token != "")
	}
	fmt.Fprintf(stderr, "%s %v%s\n", prefix, err, hint)
	return exitFor(err)
}

// candidacy is one enrolled candidate of `coord-sidecar elect`, held by lease.
type candidacy struct {
	sig       *Signals
	o         *wrapOptions
	c         *apiClient
	lease     *leaseKeeper
	id        string
	candidate string // the candidate's resource: /v1/elections/NAME/candidates/ID
}

// resign withdraws the candidate; a failure is told, not fatal (the lease's
// revocation ends the candidacy anyway).
func (e *candidacy) resign() {
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.c.callRetrying(rctx, http.MethodDelete, e.candidate, url.Values{"lease": {e.lease.ID}}, nil, nil); err != nil {
		fmt.Fprintln(e.o.stderr, "coord-sidecar elect: resign:", err)
	}
}

// campaign waits for each turn of leadership, runs the command through it and
// decides what follows, until the wrapper's exit code is known.
func (e *candidacy) campaign(command []string, events <-chan sse.Event, requeue bool) int {
	stderr := e.o.stderr
	for {
		term, err := awaitLeadership(e.sig.ctx, events, e.id, e.lease.Lost)
		if err != nil {
			return e.notLeading(err)
		}
		out := e.lead(command, events, term)
		switch {
		case out.signal == 0 && isClosed(e.lease.Lost):
			fmt.Fprintf(stderr, "coord-sidecar elect: %s while the command ran; it was stopped\n", e.lease.why)
			return ExitLeaseLost
		case e.sig.received() != 0:
			e.resign()
			return e.sig.exitCode()
		case out.stop != nil:
			fmt.Fprintln(stderr, "coord-sidecar elect: leadership lost; the command was stopped")
			continue // wait for the next turn
		case !requeue:
			e.resign()
			return out.code
		}
		if err := e.requeue(); err != nil {
			if isClosed(e.lease.Lost) {
				return e.notLeading(err)
			}
			// enrolled again or not: leave
			return e.c.unavailable(e.sig, stderr, "coord-sidecar elect: requeue:", err, e.resign)
		}
	}
}

// requeue sends the candidate to the back of the line, trying again while the
// sidecar restarts, until a signal comes or the lease is lost.
func (e *candidacy) requeue() error {
	ctx, cancel := e.lease.untilLost(e.sig.ctx)
	defer cancel()
	return e.c.callRetrying(ctx, http.MethodDelete, e.candidate, url.Values{"lease": {e.lease.ID}, "requeue": {"true"}}, nil, nil)
}

// notLeading is the exit code when waiting for leadership failed with err.
func (e *candidacy) notLeading(err error) int {
	switch {
	case e.sig.received() != 0:
		e.resign()
		return e.sig.exitCode()
	case isClosed(e.lease.Lost):
		fmt.Fprintf(e.o.stderr, "coord-sidecar elect: %s\n", e.lease.why)
		return ExitLeaseLost
	}
	return e.c.unavailable(e.sig, e.o.stderr, "coord-sidecar elect:", err, nil)
}

// lead runs the command for one term. Leadership ends when the election's
// stream shows another leader or none (a suspended state that still shows this
// candidate leading does not end it: the sidecar keeps the last leader it knew
// until the session could have expired), or when the stream ends: either stops
// the command, as does the lease's loss (a `lost-hold` of the candidacy
// included).
func (e *candidacy) lead(command []string, events <-chan sse.Event, term int64) outcome {
	lostLead := make(chan struct{})
	stopWatch := make(chan struct{})
	go func() {
		defer close(lostLead)
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					return
				}
				if leader, _ := leaderOf(ev); leader != e.id {
					return
				}
			case <-stopWatch:
				return
			}
		}
	}()
	env := []string{"COORD_TERM=" + strconv.FormatInt(term, 10), "COORD_LEASE=" + e.lease.ID}
	out := e.o.supervise(e.sig, command, env, e.lease.Lost, lostLead)
	close(stopWatch)
	<-lostLead
	return out
}

// awaitLeadership reads election events until id leads, returning its term.
func awaitLeadership(ctx context.Context, events <-chan sse.Event, id string, lost <-chan struct{}) (int64, error) {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return 0, errors.New("the election stream ended")
			}
			if leader, suspended := leaderOf(ev); leader == id && !suspended {
				return termOf(ev), nil
			}
		case <-lost:
			return 0, errors.New("lease lost")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// leaderOf returns the leading candidate of a `leader` event ("" when none)
// and whether the event is a suspended state: the leader the sidecar last
// knew, kept through a suspension until its session could have expired (then
// the leader is null). A turn starts only under a connected session; one under
// way goes on through a suspension.
func leaderOf(ev sse.Event) (leader string, suspended bool) {
	var body struct {
		Leader *struct {
			Candidate string `json:"candidate"`
		} `json:"leader"`
		Suspended bool `json:"suspended"`
	}
	if ev.Name != "leader" || json.Unmarshal(ev.Data, &body) != nil || body.Leader == nil {
		return "", body.Suspended
	}
	return body.Leader.Candidate, body.Suspended
}

func termOf(ev sse.Event) int64 {
	var body struct {
		Leader struct {
			Term int64 `json:"term"`
		} `json:"leader"`
	}
	_ = json.Unmarshal(ev.Data, &body)
	return body.Leader.Term
}

// outcome is how a child supervised ended.
type outcome struct {
	code   int             // the child's exit code (128+N when killed by signal N)
	stop   <-chan struct{} // the stop channel that ended the child, when one came first
	signal syscall.Signal  // the wrapper's end signal, when it came first
}

// supervise runs the child until it exits. The first of a stop channel closing
// and an end signal decides how it is stopped: a stop sends SIGTERM to the
// child's process group, a signal is passed on as it is (by sig); either way
// SIGKILL follows after the grace period. Every later end signal is passed on too.
// A child is not started at all once a signal has come.
func (o *wrapOptions) supervise(sig *Signals, command []string, env []string, stop ...<-chan struct{}) outcome {
	if s := sig.received(); s != 0 {
		return outcome{code: 128 + int(s), signal: s}
	}
	cmd := guarded(command)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// A process group of its own, ended with the wrapper on Linux (guarded).
	exited, err := startChild(cmd, sig.setChild)
	if err != nil {
		fmt.Fprintln(o.stderr, "coord-sidecar:", err)
		return outcome{code: 127}
	}

	stopped := firstStops(stop, exited)
	c := &supervised{cmd: cmd, exited: exited, grace: o.grace}
	var out outcome
	signalled := sig.ctx.Done()
	for {
		select {
		case <-exited:
			out.code = exitCode(cmd.ProcessState)
			if c.killing { // the guard may be reaped before the rest of its group has died
				awaitGroupGone(cmd.Process.Pid, o.grace)
			}
			return out
		case ch := <-stopped:
			if out.stop == nil && out.signal == 0 {
				out.stop = ch
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				c.killAfterGrace()
			}
		case <-signalled:
			signalled = nil
			if out.stop == nil {
				out.signal = sig.received()
			}
			c.killAfterGrace()
		}
	}
}

// firstStops sends on the channel it returns each of stop that closes before
// the child has exited; its goroutines end with the child at the latest.
func firstStops(stop []<-chan struct{}, exited <-chan struct{}) <-chan (<-chan struct{}) {
	stopped := make(chan (<-chan struct{}), len(stop))
	for _, ch := range stop {
		go func() {
			select {
			case <-ch:
				stopped <- ch
			case <-exited:
			}
		}()
	}
	return stopped
}

// supervised is a child that supervise runs.
type supervised struct {
	cmd     *exec.Cmd
	exited  <-chan struct{}
	grace   time.Duration
	killing bool // killAfterGrace was called
}

// killAfterGrace sends SIGKILL to the child's process group once the grace
// period has passed, unless the child exits first; later calls do nothing.
// Its goroutine ends with the child at the latest.
func (c *supervised) killAfterGrace() {
	if c.killing {
		return
	}
	c.killing = true
	go func() {
		select {
		case <-time.After(c.grace):
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		case <-c.exited:
		}
	}()
}

func exitCode(st *os.ProcessState) int {
	if st == nil {
		return 1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

const (
	lockUsage = `lock NAME [flags] -- COMMAND ARGS...

Takes the lock NAME (waiting up to --wait), runs COMMAND with COORD_FENCING_TOKEN
and COORD_LEASE in its environment while the lease lives, releases the lock when
COMMAND exits and exits with its code. SIGTERM, SIGINT and SIGHUP are passed on to
COMMAND; once it has exited the lock is released and the wrapper exits 128+N.
A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
--state-dir) is ridden through: streams are opened again, and the lease, the
lock and COMMAND kept. So is a suspension of the sidecar's ZooKeeper session
(a ZooKeeper server restarting, a network blip): COMMAND keeps running, and is
stopped (SIGTERM, then SIGKILL after --grace) exactly when the sidecar reports
the lock lost, which it does once the suspension has lasted two thirds of the
session timeout since ZooKeeper last answered (the session could have expired),
or when ZooKeeper declares the session expired. It exits 75 when the lock was
not acquired within --wait, 76 when the lease was lost while COMMAND ran (the
sidecar said so, or answered no keepalive for the smaller of --ttl and half its
session timeout): COMMAND was stopped.`
	electUsage = `elect NAME [--id ID] [flags] -- COMMAND ARGS...

Campaigns in the election NAME as candidate ID (by default <hostname>-<pid>)
and runs COMMAND only while ID leads, with
COORD_TERM (the leader's term, a fencing token) and COORD_LEASE in its
environment; stops it when leadership or the lease is lost. Without --requeue it
resigns and exits with COMMAND's code; with --requeue it goes to the back of the
line and runs COMMAND again at its next turn. SIGTERM, SIGINT and SIGHUP are
passed on to COMMAND; once it has exited the candidate resigns (never requeued)
and the wrapper exits 128+N. A restart of the sidecar (kill -USR2, or kill -9
and a successor on the same --state-dir) is ridden through: streams are opened
again, and the lease, the candidacy and COMMAND kept. So is a suspension of the
sidecar's ZooKeeper session (a ZooKeeper server restarting, a network blip):
the leader's COMMAND keeps running, and is stopped exactly when the sidecar
reports the leadership lost, which it does once the suspension has lasted two
thirds of the session timeout since ZooKeeper last answered (the session could
have expired), or when ZooKeeper declares the session expired. It exits 76 when
the lease was lost while COMMAND ran (the sidecar said so, or answered no
keepalive for the smaller of --ttl and half its session timeout): COMMAND was
stopped; 65 when a live candidate has the id already.

coord-sidecar elect --observe NAME, without COMMAND, campaigns not: it writes
the leader's candidate id at once, then each new leader's, a line each
(coord-sidecar elect --observe --help).`
)

// parseWrapArgs parses `NAME [flags] -- COMMAND ARGS...` (flags may also come
// before NAME). When ok is false the subcommand is over and exits with code:
// 0 after --help (the usage went to stdout), 64 on a usage error.
func parseWrapArgs(fs *flag.FlagSet, args []string, usage string, stdout, stderr io.Writer) (name string, command []string, code int, ok bool) {
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "usage: coord-sidecar %s\n\n%s\n\nflags:\n", usage, exitTableText())
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(stderr)
	}
	fs.SetOutput(stderr)
	fs.Usage = func() {} // printed below, to stdout when asked for
	var before []string
	for i, a := range args {
		if a == "--" {
			before, command = args[:i], args[i+1:]
			break
		}
	}
	if command == nil {
		before = args
	}
	var positional []string
	for len(before) > 0 {
		if err := fs.Parse(before); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				printUsage(stdout)
				return "", nil, 0, false
			}
			fmt.Fprintf(stderr, "usage: coord-sidecar %s\n(coord-sidecar %s --help lists the flags)\n", firstLine(usage), fs.Name()[len("coord-sidecar "):])
			return "", nil, ExitUsage, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		before = rest[1:]
	}
	if why := wrapArgsProblem(positional, command); why != "" {
		fmt.Fprintf(stderr, "%s: %s\nusage: coord-sidecar %s\n(coord-sidecar %s --help lists the flags)\n", fs.Name(), why, firstLine(usage), fs.Name()[len("coord-sidecar "):])
		return "", nil, ExitUsage, false
	}
	return positional[0], command, 0, true
}

// wrapArgsProblem says what is wrong with a wrapper's NAME (positional, the
// words before --) and COMMAND (after --); "" when nothing is.
func wrapArgsProblem(positional, command []string) string {
	switch {
	case command == nil && len(positional) > 1:
		return fmt.Sprintf("the command must follow -- (as in: %s -- %s)", positional[0], strings.Join(positional[1:], " "))
	case command == nil:
		return "the command must follow --"
	case len(command) == 0:
		return "no command after --"
	case len(positional) == 0:
		return "no NAME before --"
	case len(positional) > 1:
		return fmt.Sprintf("one NAME before --, not %d words: %s", len(positional), strings.Join(positional, " "))
	}
	return ""
}

// heldBy names the holder a lock-held problem carries.
func heldBy(ae *apiError) string {
	h, ok := ae.Problem["holder"].(map[string]any)
	if !ok {
		return "its holder released it meanwhile"
	}
	return fmt.Sprintf("held by %v (fencing token %v, since %v)", h["owner"], h["fencingToken"], h["since"])
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func defaultOwner() string {
	h, _ := os.Hostname()
	if h == "" {
		h = "host"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
