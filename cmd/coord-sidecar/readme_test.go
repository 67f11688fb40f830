//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/textproto"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/coord-sidecar/coord-sidecar/api/oapi"
	"github.com/coord-sidecar/coord-sidecar/internal/nodetools"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The README runs as a test: every ```console block of README.md that starts with
// a `$ ` command is a session, run here command by command as written (with bash,
// in a temporary folder), against a real sidecar on a real ZooKeeper behind
// Stoplight Prism's validating proxy (`prism proxy --errors`), and what each
// command prints is compared with the lines the README shows under it. So the
// README cannot drift from the code, and every request and answer it shows is
// one the contract allows: a Prism violation fails the test.
//
// How a session reads:
//   - `localhost:8080` is the sidecar. Commands go to Prism, except event streams
//     (paths ending in /events), which Prism cannot proxy (it waits for the whole
//     body): they go to the sidecar, and each event they print is validated here
//     against its schema in openapi.yaml.
//   - Values that differ from run to run are masked: times, dates and durations
//     match any value; lease, claim and item ids, session ids and zxids (fencing
//     tokens, terms, election event ids) bind to the value of the run where they first appear, are
//     substituted into later commands, and must be used consistently (the same
//     README value is always the same run value, two README values are two run
//     values, and zxids keep the README's order).
//   - An HTTP header block (curl -i) is compared as a set of headers, without the
//     ones Prism adds (CORS, Connection, Keep-Alive). Blank lines do not count:
//     Prism drops the newline that ends a JSON body. `time` reports only `real`.
//   - A command ending in `&` runs in the background; its output is expected among
//     the lines of a later command (it is matched there, whatever their order). A
//     read-only command (a GET) that follows a background command or a `^C` is
//     repeated until its output matches, for up to 10s: what it shows happens
//     asynchronously.
//   - `^C` after a command's output: the command (a stream) runs until it has
//     printed those lines, then gets SIGINT.
//   - Two or more spaces and `# ...` after an output line are a comment.
//     bash's report of a command killed by a signal (`bash: line 1: 123
//     Killed ...`) is not output: a terminal shows it as the shell's own.
//   - ```text blocks (a program's output, e.g. make demo's) are not run.
//   - A session whose first command starts a sidecar (`coord-sidecar --...`,
//     not a subcommand) runs sidecars of its own, and only those (a restart
//     with `kill -9`): TestREADMESessionsWithTheirOwnSidecar runs it apart.
//
// It needs curl and bash, and node and npm for Prism (installed from
// tools/package-lock.json); without node or npm it is skipped.
func TestREADMESessions(t *testing.T) {
	t.Parallel() // long and mostly waiting: see TestMain
	prism := nodetools.Bin(t, "tools", "prism")
	for _, tool := range []string{"bash", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's sessions need %s on PATH: %v (scripts/deps.sh test installs it)", tool, err)
		}
	}
	root := nodetools.Root(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sessions := parseSessions(string(readme))
	if len(sessions) < 8 {
		t.Fatalf("found %d console sessions in README.md; the parser is broken", len(sessions))
	}
	for _, s := range sessions {
		if len(s.steps) == 0 {
			t.Fatalf("README.md:%d: a ```console block that does not start with a `$ ` command: make it ```text, or a session", s.line)
		}
	}
	sessions = slices.DeleteFunc(sessions, ownSidecar)
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}

	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t))
	px := startPrism(t, prism, filepath.Join(root, "openapi.yaml"), car.Base)

	r := &readmeRun{t: t, dir: t.TempDir(), proxy: px, sidecar: strings.TrimPrefix(car.Base, "http://"),
		spec: spec, ids: map[string]string{}, zxids: map[string]int64{}}
	for _, s := range sessions {
		t.Logf("README.md:%d: a session of %d commands", s.line, len(s.steps))
		r.session(s)
		if t.Failed() {
			return
		}
	}
	if v := px.violations(); v != "" {
		t.Fatalf("Prism reported violations:\n%s", v)
	}
}

// The README's sessions that start sidecars of their own (ownSidecar) run
// here, each apart and as the other sessions do (the rules above), in a
// folder of its own with:
//   - `coord-sidecar` on PATH: the binary built from this tree (sidecartest.BuildBinary);
//   - COORD_ZK naming a shared ZooKeeper, COORD_ZK_ROOT a root of its own and
//     COORD_LISTEN a free loopback address, which `localhost:8080` in its
//     commands stands for (the README says that every flag has its COORD_
//     variable);
//   - instead of Prism (which would have to be started for each session, and
//     proxies to a sidecar that comes and goes), answerProxy: an HTTP proxy in
//     this process that checks every JSON answer against the schema
//     openapi.yaml declares for its operation and status.
//
// The session must end every sidecar it starts (a background command still
// running a minute after its last command fails it).
func TestREADMESessionsWithTheirOwnSidecar(t *testing.T) {
	t.Parallel() // mostly waiting on its processes: see TestMain
	if testing.Short() {
		t.Skip("builds the binary")
	}
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the README's sessions need %s on PATH: %v (scripts/deps.sh test installs it)", tool, err)
		}
	}
	readme, err := os.ReadFile(filepath.Join(nodetools.Root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	own := slices.DeleteFunc(parseSessions(string(readme)), func(s session) bool { return !ownSidecar(s) })
	if len(own) == 0 {
		t.Fatal("no session of README.md starts a sidecar of its own; \"Restarts and upgrades\" has one")
	}
	spec, err := oapi.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	bin := sidecartest.BuildBinary(t)
	zkc := zktest.Shared(t)
	for _, s := range own {
		listen := sidecartest.FreeAddr(t)
		px := startAnswerProxy(t, spec, listen)
		r := &readmeRun{t: t, dir: t.TempDir(), proxy: px, sidecar: listen, spec: spec,
			ids: map[string]string{}, zxids: map[string]int64{}, env: []string{
				"PATH=" + filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
				"COORD_ZK=" + strings.Join(zkc.Servers(), ","), "COORD_ZK_ROOT=" + zktest.Root(t), "COORD_LISTEN=" + listen,
			}}
		t.Logf("README.md:%d: a session of %d commands with its own sidecar", s.line, len(s.steps))
		r.session(s)
		if v := px.violations(); v != "" {
			t.Fatalf("README.md:%d: answers that break openapi.yaml:\n%s", s.line, v)
		}
		if t.Failed() {
			return
		}
	}
}

// ownSidecar says whether a session starts sidecars of its own: its first
// command runs the sidecar (flags, no subcommand).
func ownSidecar(s session) bool {
	return len(s.steps) > 0 && strings.HasPrefix(s.steps[0].command, "coord-sidecar --")
}

// Prism's validating proxy accepts the empty states (a free lock, an election
// nobody sidecartest.Leads, a read/write lock without a writer and the lock-held problem
// that says so, throughput, membership and partition groups without members,
// locks, elections and groups that never had a node) and the lists that show
// them. Prism reads `nullable` as OpenAPI 3.0.3 does, more strictly than
// kin-openapi: it refused `nullable: true` beside `allOf: [$ref]`.
func TestPrismAcceptsEmptyStates(t *testing.T) {
	t.Parallel() // mostly waiting for Prism
	prism := nodetools.Bin(t, "tools", "prism")
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), sidecartest.EmptyStatesSession...)
	px := startPrism(t, prism, filepath.Join(nodetools.Root(t), "openapi.yaml"), car.Base)
	sidecartest.MakeEmptyStates(t, car) // once Prism is up: its start loads the machine
	via := &sidecartest.Sidecar{Base: "http://" + px.addr}

	for _, path := range []string{
		"/v1/locks/l", "/v1/locks/never", "/v1/elections/e", "/v1/elections/never",
		"/v1/rwlocks/rw", "/v1/rwlocks/never", "/v1/throughput/g", "/v1/groups/gr",
		"/v1/groups/never", "/v1/partitions/p",
		"/v1/locks", "/v1/elections", "/v1/rwlocks", "/v1/throughput", "/v1/groups", "/v1/partitions",
	} {
		r, err := via.Do(context.Background(), http.MethodGet, path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != http.StatusOK { // a violation answers 500
			t.Errorf("GET %s through Prism: %d %s", path, r.Status, r.Raw)
		}
	}
	if r := via.Must(t, http.StatusConflict, http.MethodPost, "/v1/rwlocks/rw?mode=write&ttl=60s"); r.Body["writer"] != nil {
		t.Fatalf("lock-held: %s, want a null writer", r.Raw)
	}
	if v := px.violations(); v != "" {
		t.Fatalf("Prism reported violations:\n%s", v)
	}
}

// session is one console block of the README.
type session struct {
	line  int // of the block's first command, for messages
	steps []step
}

// step is one command and the lines the README shows under it.
type step struct {
	line       int
	command    string
	want       []string
	background bool // ends in &
	interrupt  bool // ^C after its output
}

var fenceRe = regexp.MustCompile("^```(\\w*)\\s*$")

// parseSessions returns the ```console blocks of the README; one whose first
// line is not a `$ ` command is returned with no steps and its line, for the
// caller to refuse (a program's transcript is a ```text block).
func parseSessions(readme string) []session {
	var out []session
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start := i
		if m[1] != "console" { // skip over any other block
			for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			}
			continue
		}
		s := session{line: start + 1}
		for i++; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			line := lines[i]
			if len(s.steps) == 0 && s.line != start+1 {
				continue // not a session: skip to the block's end
			}
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				st := step{line: i + 1, command: cmd}
				if body, ok := backgroundCommand(cmd); ok {
					st.command, st.background = body, true
				}
				s.steps = append(s.steps, st)
				continue
			}
			if len(s.steps) == 0 {
				s.line = -(start + 1) // output before any command: not a session
				continue
			}
			last := &s.steps[len(s.steps)-1]
			if line == "^C" {
				last.interrupt = true
				continue
			}
			last.want = append(last.want, line)
		}
		for k := range s.steps {
			s.steps[k].want = trimTrailingBlank(stripComments(s.steps[k].want))
		}
		if s.line < 0 {
			s.line, s.steps = -s.line, nil
		}
		out = append(out, s)
	}
	return out
}

var (
	commentRe    = regexp.MustCompile(`\s#\s.*$`)
	outCommentRe = regexp.MustCompile(`\s{2,}#\s.*$`)
	backgroundRe = regexp.MustCompile(`^(.*[^&])&\s*$`)
)

// backgroundCommand says whether cmd ends in a single & (before any comment) and
// returns it without the &.
func backgroundCommand(cmd string) (string, bool) {
	code := commentRe.ReplaceAllString(cmd, "")
	if m := backgroundRe.FindStringSubmatch(code); m != nil {
		return strings.TrimSpace(m[1]), true
	}
	return cmd, false
}

func stripComments(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = outCommentRe.ReplaceAllString(l, "")
	}
	return out
}

func trimTrailingBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// readmeRun runs the sessions in order against one sidecar, carrying the
// bindings of masked values from one session to the next.
type readmeRun struct {
	t       *testing.T
	dir     string
	proxy   contractProxy // commands go through it
	sidecar string        // host:port, for event streams
	spec    *openapi3.T
	env     []string // added to the commands' environment

	ids   map[string]string // README id → the run's
	zxids map[string]int64  // README zxid → the run's

	pending   []*job // background commands not yet matched
	afterStop bool   // the previous command was interrupted
	lastOut   string // what the last foreground command printed
	election  bool   // the current command follows an election stream
	// prefixStream: the current command follows a prefix stream, whose ids are
	// the sidecar's own numbers, not zxids.
	prefixStream bool
}

// job is one command running (or run) in bash.
type job struct {
	step step
	cmd  *exec.Cmd
	out  *sidecartest.SyncBuffer
	done chan struct{}
}

func (r *readmeRun) session(s session) {
	t := r.t
	r.pending, r.afterStop = nil, false
	for _, st := range s.steps {
		if t.Failed() {
			return
		}
		r.step(st)
	}
	// Whatever ran in the background must have printed what the README showed.
	for _, j := range r.pending {
		select {
		case <-j.done:
		case <-time.After(time.Minute):
			t.Errorf("README.md:%d: %s: still running at the end of its session", j.step.line, j.step.command)
			_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
			<-j.done
		}
		if out := outputLines(j.out.String()); len(out) > 0 {
			t.Errorf("README.md:%d: %s printed lines the README does not show:\n%s", j.step.line, j.step.command, strings.Join(out, "\n"))
		}
	}
}

func (r *readmeRun) step(st step) {
	t := r.t
	command := r.prepare(st)
	if command == "" {
		return
	}
	stream := strings.Contains(st.command, "/events")
	r.election = stream && (strings.Contains(st.command, "/elections/") || strings.Contains(st.command, "/kv/") || strings.Contains(st.command, "/locks/")) // their event ids are zxids
	r.prefixStream = stream && strings.Contains(st.command, "/kv/events?prefix=")                                                                           // its ids are the sidecar's own
	switch {
	case st.background:
		if len(st.want) > 0 {
			t.Errorf("README.md:%d: a background command's output belongs under a later command", st.line)
			return
		}
		r.pending = append(r.pending, r.start(st, command))
		r.proxy.check(t, st)
	case st.interrupt:
		r.interrupted(st, command)
		r.afterStop = true
	default:
		readOnly := !strings.Contains(command, "-X") && !stream
		retry := readOnly && (len(r.pending) > 0 || r.afterStop)
		r.afterStop = false
		deadline := time.Now().Add(10 * time.Second)
		for {
			j := r.start(st, command)
			select {
			case <-j.done:
			case <-time.After(2 * time.Minute):
				_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
				<-j.done
				t.Errorf("README.md:%d: %s did not end", st.line, st.command)
				return
			}
			r.proxy.check(t, st)
			if r.outputs(st, j, retry && time.Now().Before(deadline)) {
				break
			}
			if !retry || time.Now().After(deadline) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		if stream {
			r.validateEvents(st, command, outputLines(r.lastOut))
		}
	}
}

// nestedKeyPath is a key's path whose key holds "/".
var nestedKeyPath = regexp.MustCompile(`localhost:8080/v1/kv/[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)+`)

// prepare substitutes the sidecar's address and the bound ids into a command,
// and fails on an id the README never showed in an output.
func (r *readmeRun) prepare(st step) string {
	cmd := st.command
	addr := r.proxy.address()
	if strings.Contains(cmd, "/events") {
		addr = r.sidecar
	}
	if addr == r.proxy.address() {
		// A key with "/" (/v1/kv/config/app/db) is one {key} for the
		// sidecar, which Prism's router cannot match across segments: Prism
		// is sent the key with its slashes encoded, which the sidecar
		// takes as the same key.
		cmd = nestedKeyPath.ReplaceAllStringFunc(cmd, func(m string) string {
			return "localhost:8080/v1/kv/" + strings.ReplaceAll(strings.TrimPrefix(m, "localhost:8080/v1/kv/"), "/", "%2F")
		})
	}
	cmd = strings.ReplaceAll(cmd, "localhost:8080", addr)
	// Longest first, so that no id replaces part of another.
	keys := make([]string, 0, len(r.ids))
	for k := range r.ids {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	for _, k := range keys {
		cmd = strings.ReplaceAll(cmd, k, r.ids[k])
	}
	for _, c := range maskClasses {
		if c.kind != bindID {
			continue
		}
		for _, m := range c.re.FindAllStringSubmatch(commentRe.ReplaceAllString(st.command, ""), -1) {
			if _, ok := r.ids[m[1]]; !ok {
				r.t.Errorf("README.md:%d: %s uses %s, which no output before it shows", st.line, st.command, m[1])
				return ""
			}
		}
	}
	return cmd
}

// start runs command in bash, in its own process group, stdout and stderr together.
func (r *readmeRun) start(st step, command string) *job {
	cmd := exec.Command("bash", "-c", command)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ(), "TIMEFORMAT=\nreal\t%3lR", "NO_PROXY=*", "no_proxy=*"), r.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	j := &job{step: st, cmd: cmd, out: &sidecartest.SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = j.out, j.out
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("README.md:%d: %v", st.line, err)
	}
	go func() {
		defer close(j.done)
		_ = cmd.Wait()
	}()
	return j
}

// interrupted runs a stream until it has printed what the README shows, then
// sends it SIGINT (^C).
func (r *readmeRun) interrupted(st step, command string) {
	t := r.t
	j := r.start(st, command)
	deadline := time.Now().Add(15 * time.Second)
	var got []string
	for {
		raw := j.out.String()
		got = outputLines(raw)
		if len(got) >= len(st.want) && strings.HasSuffix(raw, "\n") {
			break
		}
		select {
		case <-j.done:
			t.Errorf("README.md:%d: %s ended before ^C, after:\n%s", st.line, st.command, strings.Join(got, "\n"))
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
			<-j.done
			t.Errorf("README.md:%d: %s printed within 15s only:\n%s\nwant:\n%s", st.line, st.command, strings.Join(got, "\n"), strings.Join(st.want, "\n"))
			return
		}
	}
	_ = syscall.Kill(-j.cmd.Process.Pid, syscall.SIGINT)
	<-j.done
	got = outputLines(j.out.String())[:len(st.want)]
	b := r.bindings()
	if !matchLines(normalize(st.want), normalize(got), b) {
		t.Errorf("README.md:%d: %s printed\n%s\nwant (masked)\n%s", st.line, st.command, strings.Join(got, "\n"), strings.Join(st.want, "\n"))
		return
	}
	r.commit(b)
	r.validateEvents(st, command, got)
}

// outputs compares a finished command's output, together with the output of
// background commands that have ended, with the lines the README shows. With
// quiet, a mismatch is not reported (the caller will try again).
func (r *readmeRun) outputs(st step, j *job, quiet bool) bool {
	t := r.t
	own := outputLines(j.out.String())
	r.lastOut = j.out.String()
	deadline := time.Now().Add(time.Minute)
	for {
		var ended []*job
		running := 0
		for _, p := range r.pending {
			select {
			case <-p.done:
				ended = append(ended, p)
			default:
				running++
			}
		}
		if b, used, ok := r.assign(st.want, own, ended); ok {
			r.commit(b)
			r.pending = slices.DeleteFunc(r.pending, func(p *job) bool { return slices.Contains(used, p) })
			return true
		}
		if quiet {
			return false
		}
		if running == 0 || len(normalize(own)) >= len(normalize(st.want)) || time.Now().After(deadline) {
			var also []string
			for _, p := range ended {
				also = append(also, outputLines(p.out.String())...)
			}
			t.Errorf("README.md:%d: %s printed\n%s\n(and background commands: %q)\nwant (masked)\n%s", st.line, st.command,
				strings.Join(own, "\n"), also, strings.Join(st.want, "\n"))
			return false
		}
		// Wait for the next background command to end: its answer is among the lines.
		cases := make([]chan struct{}, 0, running)
		for _, p := range r.pending {
			if !slices.Contains(ended, p) {
				cases = append(cases, p.done)
			}
		}
		select {
		case <-anyDone(cases):
		case <-time.After(time.Until(deadline)):
		}
	}
}

func anyDone(chs []chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	var once sync.Once
	for _, ch := range chs {
		go func() {
			<-ch
			once.Do(func() { close(out) })
		}()
	}
	return out
}

// assign finds how the README's lines split between the command's own output
// (in order) and the output of some ended background commands (each in order,
// the commands in the order they started), and the bindings that make them match.
func (r *readmeRun) assign(want, own []string, ended []*job) (*bindings, []*job, bool) {
	want, own = normalize(want), normalize(own)
	n := len(ended)
	for mask := 0; mask < 1<<n; mask++ {
		var used []*job
		var rest []string
		for i, p := range ended {
			if mask&(1<<i) != 0 {
				used = append(used, p)
				rest = append(rest, normalize(outputLines(p.out.String()))...)
			}
		}
		if len(own)+len(rest) != len(want) {
			continue
		}
		// Choose which of the README's lines are the command's own.
		var try func(wi, oi, ri int, b *bindings) (*bindings, bool)
		try = func(wi, oi, ri int, b *bindings) (*bindings, bool) {
			if wi == len(want) {
				return b, true
			}
			if oi < len(own) {
				if nb := b.clone(); matchLines(want[wi:wi+1], own[oi:oi+1], nb) {
					if fb, ok := try(wi+1, oi+1, ri, nb); ok {
						return fb, true
					}
				}
			}
			if ri < len(rest) {
				if nb := b.clone(); matchLines(want[wi:wi+1], rest[ri:ri+1], nb) {
					if fb, ok := try(wi+1, oi, ri+1, nb); ok {
						return fb, true
					}
				}
			}
			return nil, false
		}
		if b, ok := try(0, 0, 0, r.bindings()); ok {
			return b, used, true
		}
	}
	return nil, nil, false
}

// outputLines splits output into lines, without carriage returns, trailing
// blank lines and bash's own report of a command killed by a signal (what an
// interactive shell shows as `[1]+ Killed`).
func outputLines(out string) []string {
	if out == "" {
		return nil
	}
	lines := strings.Split(strings.ReplaceAll(out, "\r", ""), "\n")
	return trimTrailingBlank(slices.DeleteFunc(lines, killedRe.MatchString))
}

var killedRe = regexp.MustCompile(`^bash: line \d+: +\d+ Killed +`)

// Masking.

type maskKind int

const (
	anyValue maskKind = iota // matches any value of its class
	bindID                   // binds to the run's value; substituted into commands
	bindZxid                 // binds to the run's value; order kept
)

type maskClass struct {
	re   *regexp.Regexp // group 1 is the value
	kind maskKind
	any  string // what the value may be in the run
}

var maskClasses = []maskClass{
	{regexp.MustCompile(`(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z)`), anyValue, `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z`},
	{regexp.MustCompile(`((?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT)`), anyValue, `[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT`},
	{regexp.MustCompile(`^real\t(\d+m\d+\.\d+s)$`), anyValue, `\d+m\d+\.\d+s`},
	{regexp.MustCompile(`\b([a-z2-7]{20})\b`), bindID, `[a-z2-7]{20}`},             // lease ids; a claim id's end
	{regexp.MustCompile(`\bi\d+-([a-z2-7]{13})-\d{10}\b`), bindID, `[a-z2-7]{13}`}, // an item id's token
	{regexp.MustCompile(`"sessionId":"(0x[0-9a-f]+)"`), bindID, `0x[0-9a-f]+`},     // the same README value: the same session
	{regexp.MustCompile(`"(?:fencingToken|term)":(\d+)`), bindZxid, `\d+`},
	{regexp.MustCompile(`fencing token (\d+)`), bindZxid, `\d+`},
	{regexp.MustCompile(`\b([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-lease-\d{10}\b`), bindID, `[0-9a-f-]{36}`}, // a permit's guid
	// Group and partition versions are zxids: a README value of 3 digits or more
	// matches any (the throughput groups' small counters stay exact).
	{regexp.MustCompile(`"version":(\d{3,})`), anyValue, `\d+`},
}

// electionIDRe: an election stream's event ids are zxids too.
var electionIDRe = regexp.MustCompile(`^id: (\d+)$`)

// bindings are the README's masked values bound so far, and those a match adds.
type bindings struct {
	ids   map[string]string
	zxids map[string]int64
	// election is set while matching an election stream's output.
	election     bool
	prefixStream bool
}

func (r *readmeRun) bindings() *bindings {
	return &bindings{ids: maps(r.ids), zxids: maps(r.zxids), election: r.election, prefixStream: r.prefixStream}
}

// streamIDClass is how a stream's event id is matched: a zxid, but any
// number for the prefix stream (its ids are the sidecar's own).
func (b *bindings) streamIDClass() maskClass {
	if b.prefixStream {
		return maskClass{kind: anyValue, any: `\d+`}
	}
	return maskClass{kind: bindZxid, any: `\d+`}
}

func (b *bindings) clone() *bindings {
	return &bindings{ids: maps(b.ids), zxids: maps(b.zxids), election: b.election, prefixStream: b.prefixStream}
}

func maps[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (r *readmeRun) commit(b *bindings) { r.ids, r.zxids = b.ids, b.zxids }

// matchLines compares the README's lines with a run's (both normalized),
// binding masked values into b (which it changes only on success).
func matchLines(want, got []string, b *bindings) bool {
	if len(want) != len(got) {
		return false
	}
	nb := b.clone()
	for i := range want {
		if !matchLine(want[i], got[i], nb) {
			return false
		}
	}
	*b = *nb
	return true
}

// matchLine compares one line, binding its masked values.
func matchLine(want, got string, b *bindings) bool {
	type span struct {
		start, end int // of the value in want
		class      maskClass
	}
	var spans []span
	for _, c := range maskClasses {
		for _, m := range c.re.FindAllStringSubmatchIndex(want, -1) {
			spans = append(spans, span{m[2], m[3], c})
		}
	}
	if b.election {
		if m := electionIDRe.FindStringSubmatchIndex(want); m != nil {
			spans = append(spans, span{m[2], m[3], b.streamIDClass()})
		}
	}
	slices.SortFunc(spans, func(x, y span) int { return x.start - y.start })
	var pat strings.Builder
	pat.WriteString("^")
	var kept []span
	at := 0
	for _, s := range spans {
		if s.start < at {
			continue // overlaps one already placed
		}
		pat.WriteString(regexp.QuoteMeta(want[at:s.start]))
		pat.WriteString("(" + s.class.any + ")")
		kept = append(kept, s)
		at = s.end
	}
	pat.WriteString(regexp.QuoteMeta(want[at:]) + "$")
	m := regexp.MustCompile(pat.String()).FindStringSubmatch(got)
	if m == nil {
		return false
	}
	for i, s := range kept {
		readme, run := want[s.start:s.end], m[i+1]
		switch s.class.kind {
		case bindID:
			if bound, ok := b.ids[readme]; ok {
				if bound != run {
					return false
				}
				continue
			}
			for _, v := range b.ids {
				if v == run {
					return false // two README values, one run value
				}
			}
			b.ids[readme] = run
		case bindZxid:
			v, _ := strconv.ParseInt(run, 10, 64)
			if bound, ok := b.zxids[readme]; ok {
				if bound != v {
					return false
				}
				continue
			}
			rv, _ := strconv.ParseInt(readme, 10, 64)
			for k, w := range b.zxids { // the README's order, and distinctness
				kv, _ := strconv.ParseInt(k, 10, 64)
				if (kv < rv) != (w < v) || w == v {
					return false
				}
			}
			b.zxids[readme] = v
		}
	}
	return true
}

// normalize sorts HTTP header blocks (normalizeHeaders) and leaves blank lines
// out: Prism drops the newline that ends a JSON body (it re-serializes it), so
// what follows the body on the terminal (time's report, curl's -w) starts one
// line earlier than without it.
func normalize(lines []string) []string {
	return slices.DeleteFunc(normalizeHeaders(lines), func(l string) bool { return strings.TrimSpace(l) == "" })
}

// proxyHeaders are the headers Prism adds or drops on its own.
var proxyHeaders = map[string]bool{"Connection": true, "Keep-Alive": true, "Transfer-Encoding": true}

// normalizeHeaders sorts each HTTP header block (from a status line to the blank
// line) by header name, with canonical names and without proxyHeaders and CORS.
func normalizeHeaders(lines []string) []string {
	out := slices.Clone(lines)
	for i := 0; i < len(out); i++ {
		if !strings.HasPrefix(out[i], "HTTP/") {
			continue
		}
		end := i + 1
		for end < len(out) && out[end] != "" {
			end++
		}
		var hdrs []string
		for _, h := range out[i+1 : end] {
			name, value, ok := strings.Cut(h, ":")
			if !ok {
				hdrs = append(hdrs, h)
				continue
			}
			name = textproto.CanonicalMIMEHeaderKey(strings.TrimSpace(name))
			if proxyHeaders[name] || strings.HasPrefix(name, "Access-Control-") {
				continue
			}
			hdrs = append(hdrs, name+": "+strings.TrimSpace(value))
		}
		slices.Sort(hdrs)
		out = slices.Concat(out[:i+1], hdrs, out[end:])
		i += len(hdrs)
	}
	return out
}

// Event streams: each event the README shows is validated against its schema.

func (r *readmeRun) validateEvents(st step, command string, lines []string) {
	t := r.t
	path := ""
	if m := regexp.MustCompile(`https?://[^/\s']+(/[^?\s']*)|\b[\w.]+:\d+(/[^?\s']*)`).FindStringSubmatch(command); m != nil {
		path = m[1] + m[2]
	}
	schema := sidecartest.StreamEventSchema(r.spec, path)
	if schema == nil {
		t.Errorf("README.md:%d: no event-stream operation in openapi.yaml for %q", st.line, path)
		return
	}
	var ev map[string]any
	flush := func() {
		if ev == nil {
			return
		}
		if err := schema.VisitJSON(ev); err != nil {
			raw, _ := json.Marshal(ev)
			t.Errorf("README.md:%d: event %s does not match its schema in openapi.yaml: %v", st.line, raw, err)
		}
		ev = nil
	}
	for _, l := range lines {
		field, value, _ := strings.Cut(l, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			flush()
		case "id", "event":
			if ev == nil {
				ev = map[string]any{}
			}
			ev[field] = value
		case "data":
			if ev == nil {
				ev = map[string]any{}
			}
			var v any
			if err := json.Unmarshal([]byte(value), &v); err != nil {
				t.Errorf("README.md:%d: data is not JSON: %s", st.line, value)
			}
			ev["data"] = v
		}
	}
	flush()
}

// contractProxy is what the sessions' commands reach instead of the
// sidecar: a proxy that checks every answer against openapi.yaml.
type contractProxy interface {
	address() string // host:port
	// check fails the test on any violation found since the last check.
	check(t *testing.T, st step)
	// violations are every violation found in the whole run.
	violations() string
}

// Prism.

type prismProxy struct {
	addr string // host:port
	log  *sidecartest.SyncBuffer
	seen int // how much of log was checked
}

// startPrism runs `prism proxy --errors` for spec in front of upstream: a request
// or an answer that breaks the contract is refused (and logged as a violation).
func startPrism(t *testing.T, prism, spec, upstream string) *prismProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, prism, "proxy", spec, upstream, "--errors", "--host", "127.0.0.1", "--port", strconv.Itoa(port))
	p := &prismProxy{addr: fmt.Sprintf("127.0.0.1:%d", port), log: &sidecartest.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "FORCE_COLOR=0")
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get("http://" + p.addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-done:
			t.Fatalf("prism exited:\n%s", p.log.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("prism did not answer within 60s:\n%s", p.log.String())
		}
	}
	p.seen = len(p.log.String())
	return p
}

func (p *prismProxy) address() string { return p.addr }

// check fails the test on any violation or refusal Prism logged since the last check.
func (p *prismProxy) check(t *testing.T, st step) {
	t.Helper()
	all := p.log.String()
	fresh := all[p.seen:]
	p.seen = len(all)
	if v := violationLines(fresh); v != "" {
		t.Errorf("README.md:%d: %s: Prism reports\n%s", st.line, st.command, v)
	}
}

// violations are every violation Prism logged in the whole run.
func (p *prismProxy) violations() string { return violationLines(p.log.String()) }

func violationLines(log string) string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "Violation") || strings.Contains(l, "✖") || strings.Contains(l, "stoplight.io/prism/errors") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
