//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/coord-sidecar/coord-sidecar/internal/nodetools"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// The programs under examples/ (bash+curl, Python 3 and Node, standard libraries
// only) run here against a real sidecar; the tests cause what they should print.

// exampleLang is one language of examples/.
type exampleLang struct {
	name        string
	tools       map[string]string // executables it needs → the Debian package providing them
	interpreter string
	lock        string // the programs, relative to examples/
	election    string
	throughput  string
}

var exampleLangs = []exampleLang{
	{name: "bash", tools: map[string]string{"bash": "bash", "curl": "curl"}, interpreter: "bash",
		lock: "bash/lock.sh", election: "bash/follow-election.sh", throughput: "bash/throughput-share.sh"},
	{name: "python", tools: map[string]string{"python3": "python3"}, interpreter: "python3",
		lock: "python/lock.py", election: "python/follow_election.py", throughput: "python/throughput_share.py"},
	{name: "node", tools: map[string]string{"node": "nodejs"}, interpreter: "node",
		lock: "node/lock.mjs", election: "node/follow-election.mjs", throughput: "node/throughput-share.mjs"},
}

// need fails the test (skips it with -short) when an executable is missing.
func (l exampleLang) need(t *testing.T) {
	t.Helper()
	for tool, pkg := range l.tools {
		if _, err := exec.LookPath(tool); err != nil {
			if testing.Short() {
				t.Skipf("the %s examples need %s on PATH (-short: skipped)", l.name, tool)
			}
			t.Fatalf("the %s examples need %s on PATH (%v): install it (Debian/Ubuntu: apt-get install %s), or run with -short to skip them",
				l.name, tool, err, pkg)
		}
	}
	if l.name == "node" {
		nodetools.Install(t, "examples/node") // the typed client's openapi-fetch
	}
}

// argv is the command line that runs program with args.
func (l exampleLang) argv(program string, args ...string) []string {
	return append([]string{l.interpreter, filepath.Join("..", "..", "examples", program)}, args...)
}

// exampleVars are the variables the examples read; a run sets them itself and
// never inherits them from the test's environment.
var exampleVars = []string{"COORD_ADDR", "WAIT", "TTL", "OWNER", "VALUE", "WEIGHT", "EVENTS", "TIMEOUT"}

// exampleRun is one example program running against a sidecar.
type exampleRun struct {
	argv   []string
	stdin  io.WriteCloser
	lines  chan string // its stdout, line by line; closed at the end
	stderr sidecartest.SyncBuffer
	seen   []string      // lines read so far (for messages)
	done   chan struct{} // closed once the process has been waited for
	err    error         // Wait's answer, set before done is closed
}

// startExample runs argv with COORD_ADDR pointing at car and env set; the
// process (and everything it started: it gets a process group of its own) is
// killed once within has passed, and at the end of the test.
func startExample(t *testing.T, car *sidecartest.Sidecar, within time.Duration, env map[string]string, argv ...string) *exampleRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !slices.Contains(exampleVars, name) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "COORD_ADDR="+car.Base)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second // a straggler holding stdout open
	r := &exampleRun{argv: argv, lines: make(chan string, 1000), done: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	r.stdin = stdin
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, &r.stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("%q: %v", argv, err)
	}
	go func() {
		defer close(r.lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
	}()
	go func() {
		r.err = cmd.Wait()
		pw.Close()
		cancel()
		close(r.done)
	}()
	t.Cleanup(func() {
		cancel()
		<-r.done
		if t.Failed() {
			t.Logf("%q printed %q; stderr:\n%s", r.argv, r.seen, r.stderr.String())
		}
	})
	return r
}

// expect reads the program's next line and fails unless it matches pattern (a
// whole line); it returns the submatches.
func (r *exampleRun) expect(t *testing.T, pattern string, within time.Duration) []string {
	t.Helper()
	re := regexp.MustCompile("^" + pattern + "$")
	select {
	case line, ok := <-r.lines:
		if !ok {
			<-r.done
			t.Fatalf("%q ended (%v) before printing a line matching %q", r.argv, r.err, pattern)
		}
		r.seen = append(r.seen, line)
		m := re.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%q printed %q, want a line matching %q", r.argv, line, pattern)
		}
		return m
	case <-time.After(within):
		t.Fatalf("%q printed no line within %s (want %q)", r.argv, within, pattern)
	}
	return nil
}

// finish waits for the program to end, fails unless it exits with code, and
// returns the lines it printed after those read by expect.
func (r *exampleRun) finish(t *testing.T, code int, within time.Duration) []string {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(within):
		t.Fatalf("%q still runs after %s", r.argv, within)
	}
	var rest []string
	for line := range r.lines {
		rest = append(rest, line)
	}
	r.seen = append(r.seen, rest...)
	if got := exampleExitCode(r.err); got != code {
		t.Fatalf("%q: exit status %d (%v), want %d", r.argv, got, r.err, code)
	}
	return rest
}

// exit is finish for a program that has nothing more to print.
func (r *exampleRun) exit(t *testing.T, code int, within time.Duration) {
	t.Helper()
	if rest := r.finish(t, code, within); len(rest) > 0 {
		t.Fatalf("%q printed %q before exiting, want nothing more", r.argv, rest)
	}
}

// examplePrefixOf fails unless every line matches the pattern at its index in want
// (whole lines): a program stopped by TIMEOUT prints a prefix of what it would.
// $1 in a pattern stands for the first submatch of the first line.
func examplePrefixOf(t *testing.T, lines []string, want ...string) {
	t.Helper()
	if len(lines) > len(want) {
		t.Fatalf("printed %q, want at most %d lines", lines, len(want))
	}
	first := ""
	for i, line := range lines {
		m := regexp.MustCompile("^" + strings.ReplaceAll(want[i], "$1", first) + "$").FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("line %d is %q, want %q (%q)", i+1, line, want[i], lines)
		}
		if i == 0 && len(m) > 1 {
			first = m[1]
		}
	}
}

func exampleExitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	return -1
}

func exampleAtoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The lock examples: a refusal when the lock stays held (WAIT=0s), then a wait
// for the lock the test holds, a token above the test's that GET shows as the
// holder's while the example's command runs (with FENCING_TOKEN), and the lock
// free once the command is done.
func TestExampleLock(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	for _, l := range exampleLangs {
		t.Run(l.name, func(t *testing.T) {
			l.need(t)
			t.Parallel()
			lock := "example-lock-" + l.name
			owner := "example-" + l.name
			held := car.Must(t, http.StatusCreated, http.MethodPost, "/v1/locks/"+lock+"?owner=test&ttl=60s")
			heldToken := sidecartest.Num(held.Body["fencingToken"])
			// The command prints the token it was given, then waits for stdin to close.
			work := []string{"sh", "-c", `echo "work with token $FENCING_TOKEN"; exec cat`}

			refused := startExample(t, car, 30*time.Second, map[string]string{"WAIT": "0s", "TTL": "30", "OWNER": owner},
				l.argv(l.lock, append([]string{lock}, work...)...)...)
			refused.exit(t, 1, 30*time.Second)
			if !strings.Contains(refused.stderr.String(), "lock-held") {
				t.Fatalf("refusal on stderr: %q, want the lock-held problem", refused.stderr.String())
			}

			run := startExample(t, car, 60*time.Second, map[string]string{"WAIT": "30s", "TTL": "30", "OWNER": owner},
				l.argv(l.lock, append([]string{lock}, work...)...)...)
			testutil.Eventually(t, 10*time.Second, "the example waits for the lock", func() bool {
				return sidecartest.Num(car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+lock).Body["waiters"]) == 1
			})
			car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/locks/"+lock+"?lease="+sidecartest.Str(held.Body["lease"]))
			token := run.expect(t, `token ([0-9]+)`, 30*time.Second)[1]
			if exampleAtoi(t, token) <= heldToken {
				t.Fatalf("token %s after the test's %d", token, heldToken)
			}
			run.expect(t, "work with token "+token, 30*time.Second)
			st := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+lock)
			holder, _ := st.Body["holder"].(map[string]any)
			if holder == nil || fmt.Sprint(sidecartest.Num(holder["fencingToken"])) != token || sidecartest.Str(holder["owner"]) != owner {
				t.Fatalf("while the example works: %s, want holder %s with token %s", st.Raw, owner, token)
			}
			if err := run.stdin.Close(); err != nil { // the work ends
				t.Fatal(err)
			}
			run.expect(t, "released", 30*time.Second)
			run.exit(t, 0, 30*time.Second)
			if st := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+lock); st.Body["holder"] != nil {
				t.Fatalf("after the example: %s, want no holder", st.Raw)
			}
			if e := run.stderr.String(); e != "" {
				t.Errorf("a run that took, worked and released wrote to stderr: %q", e)
			}
		})
	}
}

// The excerpts of examples/bash/lock.sh, the README's short one and
// docs/EXAMPLES.md's walkthrough, are the script's own text, line for line.
func TestREADMEQuotesLockShAsItIs(t *testing.T) {
	script, err := os.ReadFile("../../examples/bash/lock.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{"README.md", "docs/EXAMPLES.md"} {
		text, err := os.ReadFile(filepath.Join("..", "..", doc))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(text), "```bash\nif ! grant=$(curl")
		excerpt, _, closed := strings.Cut(rest, "\n```\n")
		if !ok || !closed {
			t.Fatalf("%s has no excerpt of lock.sh (a bash block from its acquire)", doc)
		}
		if excerpt = "if ! grant=$(curl" + excerpt; !strings.Contains(string(script), excerpt+"\n") {
			t.Fatalf("%s's excerpt of lock.sh is not the script's text:\n%s", doc, excerpt)
		}
	}
}

// The election followers print the current leader, skip an event in which only
// the line of candidates changes, print themselves when the leader before them
// resigns, and stop after EVENTS lines; their candidacy ends with them (their
// lease stream closes) although its TTL is long. Another run stops at TIMEOUT.
func TestExampleFollowElection(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	for _, l := range exampleLangs {
		t.Run(l.name, func(t *testing.T) {
			l.need(t)
			t.Parallel()
			election := "example-election-" + l.name
			t1 := sidecartest.Campaign(t, car, election, "t1", "ttl=60s")
			term1 := fmt.Sprint(sidecartest.Num(t1.Body["term"]))

			run := startExample(t, car, 60*time.Second, map[string]string{"EVENTS": "2", "TIMEOUT": "60", "TTL": "60", "VALUE": "example"},
				l.argv(l.election, election, "ex")...)
			run.expect(t, "enrolled ex leader false term "+term1, 30*time.Second)
			run.expect(t, "leader t1 term "+term1, 30*time.Second)
			sidecartest.Campaign(t, car, election, "t2", "ttl=60s") // behind ex: the leader stays
			car.Must(t, http.StatusNoContent, http.MethodDelete, "/v1/elections/"+election+"/candidates/t1?lease="+sidecartest.Str(t1.Body["lease"]))
			term2 := run.expect(t, `leader ex term ([0-9]+)`, 30*time.Second)[1]
			if exampleAtoi(t, term2) <= exampleAtoi(t, term1) {
				t.Fatalf("term %s after %s", term2, term1)
			}
			run.exit(t, 0, 30*time.Second)

			// ex's lease (TTL 60s) ended with its stream, not with its TTL: t2
			// sidecartest.Leads well before the TTL could have run out. (How soon after the
			// stream's end depends on the machine: a busy one took over 10s.)
			testutil.Eventually(t, 45*time.Second, "t2 alone, the example's lease gone with its stream", func() bool {
				r := car.Must(t, http.StatusOK, http.MethodGet, "/v1/elections/"+election+"?wait=10s&term="+term2)
				leader, _ := r.Body["leader"].(map[string]any)
				return leader != nil && sidecartest.Str(leader["candidate"]) == "t2" && len(r.Body["candidates"].([]any)) == 1
			})
		})
		t.Run(l.name+"-timeout", func(t *testing.T) {
			l.need(t)
			t.Parallel()
			// Without EVENTS only TIMEOUT stops it (exit status 0); on a slow
			// machine it may stop before printing everything.
			run := startExample(t, car, 60*time.Second, map[string]string{"TIMEOUT": "2"},
				l.argv(l.election, "example-timeout-"+l.name, "alone")...)
			examplePrefixOf(t, run.finish(t, 0, 30*time.Second), `enrolled alone leader true term ([0-9]+)`, `leader alone term $1`)
		})
	}
}

// The throughput examples print their share as the test changes the group:
// alone with the whole limit, half when another member joins, a quarter when
// that member's weight becomes 3; their membership ends with them.
func TestExampleThroughputShare(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	for _, l := range exampleLangs {
		t.Run(l.name, func(t *testing.T) {
			l.need(t)
			t.Parallel()
			group := "example-group-" + l.name
			car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+group, `{"limit":1000}`)

			run := startExample(t, car, 60*time.Second, map[string]string{"EVENTS": "3", "TIMEOUT": "60", "TTL": "60", "WEIGHT": "1"},
				l.argv(l.throughput, group, "ex")...)
			run.expect(t, "joined ex", 30*time.Second)
			v1 := exampleAtoi(t, run.expect(t, `share 1000 version ([0-9]+)`, 30*time.Second)[1])
			t1 := sidecartest.JoinTP(t, car, group, "t1", "weight=1")
			v2 := exampleAtoi(t, run.expect(t, `share 500 version ([0-9]+)`, 30*time.Second)[1])
			car.Send(t, http.StatusOK, http.MethodPut, "/v1/throughput/"+group+"/members/t1?lease="+t1.Lease, `{"weight":3}`)
			v3 := exampleAtoi(t, run.expect(t, `share 250 version ([0-9]+)`, 30*time.Second)[1])
			if !(v1 < v2 && v2 < v3) {
				t.Fatalf("versions %d, %d, %d", v1, v2, v3)
			}
			run.exit(t, 0, 30*time.Second)

			// ex's lease (TTL 60s) ended with its stream: t1 gets the whole limit.
			sidecartest.AwaitShare(t, car, group, "t1", 1000, 10*time.Second)
		})
		t.Run(l.name+"-timeout", func(t *testing.T) {
			l.need(t)
			t.Parallel()
			// Without EVENTS only TIMEOUT stops it (exit status 0); on a slow
			// machine it may stop before printing everything. The group has no
			// limit: shares of 0.
			run := startExample(t, car, 60*time.Second, map[string]string{"TIMEOUT": "2"},
				l.argv(l.throughput, "example-timeout-"+l.name, "alone")...)
			examplePrefixOf(t, run.finish(t, 0, 30*time.Second), `joined alone`, `share 0 version [0-9]+`)
		})
	}
}

// docker-compose.yaml cannot run here (no Docker engine); it parses, and says
// what docs/EXAMPLES.md promises: ZooKeeper 3.8 with a health check, the sidecar built
// from the Dockerfile once ZooKeeper is healthy, pointed at it, on 127.0.0.1:8080.
func TestDockerCompose(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type service struct {
		Image string `yaml:"image"`
		Build struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		DependsOn   map[string]struct {
			Condition string `yaml:"condition"`
		} `yaml:"depends_on"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	}
	var compose struct {
		Services map[string]service `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yaml: %v", err)
	}
	zk, side := compose.Services["zookeeper"], compose.Services["sidecar"]
	if zk.Image != "zookeeper:3.8" || !strings.Contains(strings.Join(zk.Healthcheck.Test, " "), "ruok") ||
		!strings.Contains(zk.Environment["ZOO_4LW_COMMANDS_WHITELIST"], "ruok") {
		t.Fatalf("zookeeper service: %+v", zk)
	}
	if side.Build.Context != "." || side.Build.Dockerfile != "Dockerfile" {
		t.Fatalf("sidecar build: %+v", side.Build)
	}
	if side.Environment["COORD_ZK"] != "zookeeper:2181" || side.DependsOn["zookeeper"].Condition != "service_healthy" {
		t.Fatalf("sidecar service: %+v", side)
	}
	if !slices.Equal(side.Ports, []string{"127.0.0.1:8080:8080"}) {
		t.Fatalf("sidecar ports %q, want only 127.0.0.1:8080:8080", side.Ports)
	}
	// The port published is the one the image listens on.
	dockerfile, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^ENV COORD_LISTEN=0\.0\.0\.0:8080$`).Match(dockerfile) {
		t.Fatal("the Dockerfile no longer sets COORD_LISTEN=0.0.0.0:8080; update docker-compose.yaml")
	}
}

// The bash and Python examples take COORD_ADDR in every form the subcommands take
// (see parseAddr in internal/ctl): HOST:PORT, a URL (with a trailing slash too), https:// and a
// unix socket, for plain requests (the lock) and event streams (the election);
// a bad address is refused with a message that says what is wanted. (The Node
// examples are built on the generated client and tested with it.)
func TestExampleAddressForms(t *testing.T) {
	zkc := zktest.Shared(t)
	car := sidecartest.Start(t, zkc.Servers(), zktest.Root(t), steadySession...)
	httpsURL, caFile, socketPath := addrProxies(t, car)
	forms := []string{car.M.Addr(), car.Base, car.Base + "/", httpsURL, "unix:" + socketPath, "unix://" + socketPath}
	for _, l := range exampleLangs {
		if l.name != "bash" && l.name != "python" {
			continue
		}
		t.Run(l.name, func(t *testing.T) {
			l.need(t)
			t.Parallel()
			c := car
			for i, addr := range forms {
				// CURL_CA_BUNDLE for curl, SSL_CERT_FILE for Python's ssl.
				env := map[string]string{"COORD_ADDR": addr, "SSL_CERT_FILE": caFile, "CURL_CA_BUNDLE": caFile,
					"WAIT": "5s", "TTL": "30", "OWNER": "addr", "EVENTS": "1", "TIMEOUT": "30"}
				lock := fmt.Sprintf("addr-%s-%d", l.name, i)
				run := startExample(t, c, 30*time.Second, env,
					l.argv(l.lock, lock, "sh", "-c", `echo "work with token $FENCING_TOKEN"`)...)
				token := run.expect(t, `token ([0-9]+)`, 20*time.Second)[1]
				run.expect(t, "work with token "+token, 20*time.Second)
				run.expect(t, "released", 20*time.Second)
				run.exit(t, 0, 20*time.Second)
				if st := c.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+lock); st.Body["holder"] != nil {
					t.Fatalf("COORD_ADDR=%s: after the example %s, want the lock free", addr, st.Raw)
				}
				follow := startExample(t, c, 30*time.Second, env, l.argv(l.election, lock, "ex")...)
				term := follow.expect(t, `enrolled ex leader true term ([0-9]+)`, 20*time.Second)[1]
				follow.expect(t, "leader ex term "+term, 20*time.Second)
				follow.exit(t, 0, 20*time.Second)
			}
			for _, bad := range []string{"ftp://nowhere:21", "localhost", "localhost:8080/v1", "unix:"} {
				run := startExample(t, c, 30*time.Second, map[string]string{"COORD_ADDR": bad}, l.argv(l.lock, "never", "true")...)
				run.exit(t, 1, 20*time.Second)
				if msg := run.stderr.String(); !strings.Contains(msg, "want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH") {
					t.Fatalf("COORD_ADDR=%s: stderr %q, want the forms wanted", bad, msg)
				}
			}
		})
	}
}
