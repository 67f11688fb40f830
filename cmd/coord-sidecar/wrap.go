package main

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
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// Exit codes of the lock and elect subcommands (besides the child's own code).
const (
	exitUsage       = 64 // bad command line
	exitUnavailable = 69 // the sidecar could not be reached or refused the request
	exitNotAcquired = 75 // the lock was not acquired within --wait (EX_TEMPFAIL)
	exitLeaseLost   = 76 // the lease was lost while the child ran: the child was stopped
)

// wrapOptions are the flags shared by the subcommands.
type wrapOptions struct {
	addr, token string
	ttl, grace  time.Duration
	stderr      io.Writer
	transport   transportOptions // https://, unix:, --token-file: transport.go
}

func (o *wrapOptions) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&o.addr, "addr", env(getenv, "COORD_ADDR", "127.0.0.1:8080"), "address of the running sidecar: host:port, http://, https:// or unix:/path (COORD_ADDR)")
	fs.StringVar(&o.token, "token", getenv("COORD_TOKEN"), "bearer token of the sidecar (COORD_TOKEN)")
	fs.DurationVar(&o.ttl, "ttl", 15*time.Second, "lease ttl; the wrapper keeps the lease alive through its stream")
	fs.DurationVar(&o.grace, "grace", 10*time.Second, "time between SIGTERM and SIGKILL when the child must stop")
	o.transport.register(fs, getenv)
}

// runLock implements `coord-sidecar lock NAME [flags] -- COMMAND ARGS...`: it takes
// the lock, runs the child with COORD_FENCING_TOKEN and COORD_LEASE while the lease
// lives, releases when the child exits and exits with the child's code. A lost
// lease stops the child at once (SIGTERM, then SIGKILL after --grace) and exits 76;
// not acquired within --wait exits 75.
func runLock(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("coord-sidecar lock", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := wrapOptions{stderr: stderr}
	o.register(fs, getenv)
	wait := fs.Duration("wait", 30*time.Second, "how long to wait for the lock")
	owner := fs.String("owner", defaultOwner(), "owner shown to others as the holder")
	name, command, code := parseWrapArgs(fs, args, "lock NAME [flags] -- COMMAND ARGS...")
	if code != 0 {
		return code
	}
	c, err := o.client()
	if err != nil {
		fmt.Fprintln(stderr, "coord-sidecar lock:", err)
		return exitUsage
	}
	lease, err := c.keepLease(ctx, o.ttl)
	if err != nil {
		fmt.Fprintln(stderr, "coord-sidecar lock:", err)
		return exitUnavailable
	}
	defer lease.Close()
	var grant struct {
		FencingToken int64 `json:"fencingToken"`
	}
	q := url.Values{"lease": {lease.ID}, "wait": {wait.String()}, "owner": {*owner}}
	if err := c.call(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(name), q, nil, &grant); err != nil {
		var ae *apiError
		if errors.As(err, &ae) && ae.problem() == "lock-held" {
			fmt.Fprintf(stderr, "coord-sidecar lock: %q not acquired within %s\n", name, *wait)
			return exitNotAcquired
		}
		fmt.Fprintln(stderr, "coord-sidecar lock:", err)
		return exitUnavailable
	}
	env := []string{"COORD_FENCING_TOKEN=" + strconv.FormatInt(grant.FencingToken, 10), "COORD_LEASE=" + lease.ID}
	code, lost := o.supervise(ctx, command, env, lease.Lost)
	if lost {
		fmt.Fprintf(stderr, "coord-sidecar lock: %s while the command ran; it was stopped\n", lease.why)
		return exitLeaseLost
	}
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.call(rctx, http.MethodDelete, "/v1/locks/"+url.PathEscape(name), url.Values{"lease": {lease.ID}}, nil, nil); err != nil {
		fmt.Fprintln(stderr, "coord-sidecar lock: release:", err)
	}
	return code
}

// runElect implements `coord-sidecar elect NAME --id ID [flags] -- COMMAND ARGS...`:
// it campaigns and runs the child only while this candidate leads (with COORD_TERM
// and COORD_LEASE), stopping it on loss of leadership, of the session's certainty,
// or of the lease. Without --requeue it exits with the child's code once the child
// exits; with --requeue it resigns to the back of the line and runs the child again
// at its next turn, until signalled. A lost lease exits 76.
func runElect(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("coord-sidecar elect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := wrapOptions{stderr: stderr}
	o.register(fs, getenv)
	id := fs.String("id", defaultOwner(), "candidate id, unique in the election")
	value := fs.String("value", "", "value published with the candidate")
	requeue := fs.Bool("requeue", false, "take turns: after the command exits, go to the back of the line and run it again at the next turn")
	name, command, code := parseWrapArgs(fs, args, "elect NAME --id ID [flags] -- COMMAND ARGS...")
	if code != 0 {
		return code
	}
	c, err := o.client()
	if err != nil {
		fmt.Fprintln(stderr, "coord-sidecar elect:", err)
		return exitUsage
	}
	lease, err := c.keepLease(ctx, o.ttl)
	if err != nil {
		fmt.Fprintln(stderr, "coord-sidecar elect:", err)
		return exitUnavailable
	}
	defer lease.Close()
	path := "/v1/elections/" + url.PathEscape(name)
	q := url.Values{"lease": {lease.ID}, "id": {*id}}
	if err := c.call(ctx, http.MethodPost, path+"/candidates", q, map[string]string{"value": *value}, nil); err != nil {
		fmt.Fprintln(stderr, "coord-sidecar elect:", err)
		return exitUnavailable
	}
	events, err := c.stream(ctx, path+"/events")
	if err != nil {
		fmt.Fprintln(stderr, "coord-sidecar elect:", err)
		return exitUnavailable
	}
	for {
		term, err := awaitLeadership(ctx, events, *id, lease.Lost)
		if err != nil {
			if lease.why != "" {
				fmt.Fprintf(stderr, "coord-sidecar elect: %s\n", lease.why)
				return exitLeaseLost
			}
			fmt.Fprintln(stderr, "coord-sidecar elect:", err)
			return exitUnavailable
		}
		// Leadership ends when another candidate leads, or this sidecar cannot vouch.
		lostLead := make(chan struct{})
		stopWatch := make(chan struct{})
		go func() {
			defer close(lostLead)
			for {
				select {
				case ev, ok := <-events:
					if !ok || leaderOf(ev) != *id {
						return
					}
				case <-stopWatch:
					return
				}
			}
		}()
		env := []string{"COORD_TERM=" + strconv.FormatInt(term, 10), "COORD_LEASE=" + lease.ID}
		code, stopped := o.supervise(ctx, command, env, lease.Lost, lostLead)
		close(stopWatch)
		<-lostLead
		switch {
		case isClosed(lease.Lost):
			fmt.Fprintf(stderr, "coord-sidecar elect: %s while the command ran; it was stopped\n", lease.why)
			return exitLeaseLost
		case stopped:
			fmt.Fprintln(stderr, "coord-sidecar elect: leadership lost; the command was stopped")
			continue // wait for the next turn
		case ctx.Err() != nil:
			return code
		case !*requeue:
			return code
		}
		if err := c.call(ctx, http.MethodDelete, path+"/candidates/"+url.PathEscape(*id), url.Values{"lease": {lease.ID}, "requeue": {"true"}}, nil, nil); err != nil {
			fmt.Fprintln(stderr, "coord-sidecar elect: requeue:", err)
			return exitUnavailable
		}
	}
}

// awaitLeadership reads election events until id leads, returning its term.
func awaitLeadership(ctx context.Context, events <-chan sse.Event, id string, lost <-chan struct{}) (int64, error) {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return 0, errors.New("the election stream ended")
			}
			if leaderOf(ev) == id {
				return termOf(ev), nil
			}
		case <-lost:
			return 0, errors.New("lease lost")
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// leaderOf returns the leading candidate of a `leader` event ("" when none or
// when the sidecar cannot vouch for one).
func leaderOf(ev sse.Event) string {
	var body struct {
		Leader *struct {
			Candidate string `json:"candidate"`
		} `json:"leader"`
		Suspended bool `json:"suspended"`
	}
	if ev.Name != "leader" || json.Unmarshal(ev.Data, &body) != nil || body.Leader == nil || body.Suspended {
		return ""
	}
	return body.Leader.Candidate
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

// supervise runs the child until it exits or any of stop closes; a stop ends the
// child with SIGTERM, then SIGKILL after the grace period. Signals the wrapper
// receives (SIGTERM, SIGINT, SIGHUP) are passed to the child. It returns the
// child's exit code and whether a stop channel ended it.
func (o *wrapOptions) supervise(ctx context.Context, command []string, env []string, stop ...<-chan struct{}) (int, bool) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(o.stderr, "coord-sidecar:", err)
		return 127, false
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)

	anyStop := make(chan struct{})
	var once sync.Once
	for _, ch := range stop {
		go func() {
			select {
			case <-ch:
				once.Do(func() { close(anyStop) })
			case <-exited:
			}
		}()
	}
	stopped := false
	for {
		select {
		case <-exited:
			return exitCode(cmd.ProcessState), stopped
		case s := <-sigs:
			_ = syscall.Kill(-cmd.Process.Pid, s.(syscall.Signal))
		case <-anyStop:
			if !stopped {
				stopped = true
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				go func() {
					select {
					case <-time.After(o.grace):
						_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					case <-exited:
					}
				}()
			}
			anyStop = nil
		case <-ctx.Done():
			if !stopped {
				stopped = true
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			}
		}
	}
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

// parseWrapArgs parses `NAME [flags] -- COMMAND ARGS...` (flags may also come
// before NAME). It returns a non-zero exit code on a usage error.
func parseWrapArgs(fs *flag.FlagSet, args []string, usage string) (name string, command []string, code int) {
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
			return "", nil, exitUsage
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		positional = append(positional, rest[0])
		before = rest[1:]
	}
	if len(positional) != 1 || len(command) == 0 {
		fmt.Fprintln(fs.Output(), "usage: coord-sidecar "+usage)
		return "", nil, exitUsage
	}
	return positional[0], command, 0
}

func defaultOwner() string {
	h, _ := os.Hostname()
	if h == "" {
		h = "host"
	}
	return fmt.Sprintf("%s-%d", h, os.Getpid())
}
