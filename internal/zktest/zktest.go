// Package zktest starts real ZooKeeper servers for tests: one standalone
// server shared by a whole test process, private standalone servers and
// ensembles. It needs Debian's zookeeper package (/usr/share/java/zookeeper.jar,
// installed by scripts/zookeeper.sh install) and a java binary on PATH.
// Nothing is mocked.
//
// Every server runs in its own temporary directory (configuration, data and
// the server's log, zookeeper.log) on free ports of 127.0.0.1, with
// tickTime=200, minSessionTimeout=400ms and maxSessionTimeout=60s.
// Use Main in TestMain so that no server outlives the test process.
package zktest

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/zkwire"
)

const (
	jarPath      = "/usr/share/java/zookeeper.jar"
	nettyFactory = "org.apache.zookeeper.server.NettyServerCnxnFactory"
	slf4jPath    = "/usr/share/java/slf4j-simple.jar" // without an SLF4J binding the server logs nothing
	startTimeout = 60 * time.Second
	pollInterval = 50 * time.Millisecond
)

// node is one ZooKeeper server process, restartable with the same
// directory and ports.
type node struct {
	id         int // myid, 1-based
	dir        string
	clientPort int
	securePort int // 0: no TLS

	mu     sync.Mutex
	cmd    *exec.Cmd     // nil before the first start
	exited chan struct{} // closed once cmd has been reaped
}

// core is the state shared by every Cluster handle of one set of servers.
type core struct {
	dir     string // removed by stop; "" for external servers
	servers []string
	secure  []string // secure client addresses; nil without TLS
	nodes   []*node  // nil for external servers (ZK_SERVERS)
}

// Cluster is a handle on a set of ZooKeeper servers, bound to the test that
// obtained it: its methods report failures to that test, so call them from
// the test's goroutine.
type Cluster struct {
	tb testing.TB
	c  *core
}

var (
	liveMu sync.Mutex
	live   = map[*core]bool{} // started and not yet stopped

	// shared is Shared's standalone server.
	shared = &sharedCore{n: 1, what: "shared server"}
	// sharedEnsemble is SharedEnsemble's 3-node ensemble.
	sharedEnsemble = &sharedCore{n: 3, what: "shared ensemble"}
)

// sharedCore is a set of servers the whole test process shares: started by
// its first user, stopped by Main.
type sharedCore struct {
	sync.Mutex
	n    int    // how many servers
	what string // what failures call it
	c    *core
	err  error
}

// cluster returns tb's handle on the shared servers, starting them on first
// use. A failed start fails this and every later caller.
func (s *sharedCore) cluster(tb testing.TB) *Cluster {
	tb.Helper()
	s.Lock()
	if s.c == nil && s.err == nil {
		s.c, s.err = startCore(s.n, nil)
	}
	c, err := s.c, s.err
	s.Unlock()
	if err != nil {
		tb.Fatalf("zktest: %s: %v", s.what, err)
	}
	return &Cluster{tb: tb, c: c}
}

// forget drops the shared servers; Main stops them with every live core.
func (s *sharedCore) forget() {
	s.Lock()
	s.c, s.err = nil, nil
	s.Unlock()
}

// Main runs the tests, then stops every server this process started and
// removes their directories, and returns m.Run's exit code. Use it as
// os.Exit(zktest.Main(m)) in TestMain.
func Main(m *testing.M) int {
	code := m.Run()
	shared.forget()
	sharedEnsemble.forget()
	liveMu.Lock()
	cores := make([]*core, 0, len(live))
	for c := range live {
		cores = append(cores, c)
	}
	liveMu.Unlock()
	for _, c := range cores {
		c.stop()
	}
	return code
}

// Shared returns the test process's standalone server, started on first use
// and reused by every test until Main stops it; tests using it must
// confine themselves to their own Root. If the environment variable
// ZK_SERVERS is set (comma-separated host:port list), Shared starts nothing
// and returns those servers; Kill and Restart then skip the test. A failed
// start fails this and every later caller.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	if env := os.Getenv("ZK_SERVERS"); env != "" {
		var servers []string
		for _, s := range strings.Split(env, ",") {
			if s = strings.TrimSpace(s); s != "" {
				servers = append(servers, s)
			}
		}
		return &Cluster{tb: tb, c: &core{servers: servers}}
	}
	return shared.cluster(tb)
}

// SharedEnsemble returns the test process's 3-node ensemble, started on first
// use and reused by every test until Main stops it (as Shared is): for tests
// that need an ensemble's behaviour (a resume on another server, the
// ensemble's sync) but kill none of its servers. Tests using it must confine
// themselves to their own Root, and must not Kill or Restart its servers.
func SharedEnsemble(tb testing.TB) *Cluster {
	tb.Helper()
	return sharedEnsemble.cluster(tb)
}

// StartStandalone starts a standalone server of the test's own and returns
// once it serves requests. The server is killed and its directory removed
// in tb.Cleanup.
func StartStandalone(tb testing.TB) *Cluster {
	tb.Helper()
	return start(tb, 1, nil)
}

// StartEnsemble starts an n-node ensemble of the test's own and returns once
// a quorum serves: one node reports Mode leader and every other follower.
// The servers are killed and their directories removed in tb.Cleanup.
func StartEnsemble(tb testing.TB, n int) *Cluster {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("zktest: StartEnsemble needs n >= 1, got %d", n)
	}
	return start(tb, n, nil)
}

func start(tb testing.TB, n int, tlsOpt *TLS) *Cluster {
	tb.Helper()
	c, err := startCore(n, tlsOpt)
	if err != nil {
		tb.Fatalf("zktest: %v", err)
	}
	tb.Cleanup(c.stop)
	return &Cluster{tb: tb, c: c}
}

// SecureServers returns the "127.0.0.1:port" secure (TLS) client address of
// every node, in node order; nil for servers started without TLS.
func (c *Cluster) SecureServers() []string { return slices.Clone(c.c.secure) }

// Servers returns the "127.0.0.1:port" client address of every node, in
// node order.
func (c *Cluster) Servers() []string { return slices.Clone(c.c.servers) }

// Server returns the client address of node i.
func (c *Cluster) Server(i int) string { return c.c.servers[i] }

// Kill sends SIGKILL to node i and returns once the process has exited.
// Killing a node that is not running does nothing. On the Shared server
// this affects every test of the process.
func (c *Cluster) Kill(i int) {
	c.tb.Helper()
	if c.c.nodes == nil {
		c.tb.Skip("zktest: Kill needs servers started by zktest, not ZK_SERVERS")
	}
	c.c.nodes[i].kill()
}

// Stop sends SIGTERM to node i, as an operator's "systemctl stop" or a
// Kubernetes pod deletion does, and returns once the process has exited: the
// JVM closes its client connections and its quorum links on its way out, where
// Kill cuts them. A node that does not exit within a minute is killed. Stopping
// a node that is not running does nothing. Restart starts it again.
func (c *Cluster) Stop(i int) {
	c.tb.Helper()
	if c.c.nodes == nil {
		c.tb.Skip("zktest: Stop needs servers started by zktest, not ZK_SERVERS")
	}
	c.c.nodes[i].stop(startTimeout)
}

// AwaitSynced waits until every node of the ensemble serves, one of them as
// the leader, and the leader counts every other node among its synced
// followers (its mntr zk_synced_followers): the check an operator makes
// before restarting the next server of a rolling restart. It fails the test,
// with each node's mode and log tail, if that takes longer than within. On a
// standalone server it waits until the server serves.
func (c *Cluster) AwaitSynced(within time.Duration) {
	c.tb.Helper()
	if c.c.nodes == nil {
		c.tb.Skip("zktest: AwaitSynced needs servers started by zktest, not ZK_SERVERS")
	}
	deadline := time.Now().Add(within)
	all := make([]int, len(c.c.nodes))
	for i := range all {
		all[i] = i
	}
	if err := c.c.waitServing(all, deadline); err != nil {
		c.tb.Fatalf("zktest: await synced: %v", err)
	}
	if len(c.c.nodes) == 1 {
		return
	}
	for {
		leader := c.Leader()
		if leader >= 0 && syncedFollowers(c.c.servers[leader]) == len(c.c.nodes)-1 {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			fmt.Fprintf(&b, "zktest: the ensemble is not synced within %v (leader node %d)", within, leader)
			for i, nd := range c.c.nodes {
				fmt.Fprintf(&b, "\n--- node %d (%s) mode %q, log tail:\n%s", i, c.c.servers[i], c.Mode(i), nd.logTail())
			}
			c.tb.Fatal(b.String())
		}
		time.Sleep(pollInterval)
	}
}

// syncedFollowers is the leader's mntr zk_synced_followers (-1 when the
// server at addr does not report it: it is no leader, or does not answer).
func syncedFollowers(addr string) int {
	s, err := fourLetter(addr, "mntr")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(s, "\n") {
		if v, ok := strings.CutPrefix(line, "zk_synced_followers"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// Restart starts node i again (killing it first if it still runs) with the
// same data directory and ports, and returns once it serves: Mode
// standalone for a standalone server, leader or follower in an ensemble.
// It fails the test, with the tail of the node's log, if that takes more
// than a minute.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	if c.c.nodes == nil {
		c.tb.Skip("zktest: Restart needs servers started by zktest, not ZK_SERVERS")
	}
	nd := c.c.nodes[i]
	nd.kill()
	err := nd.start()
	if err == nil {
		err = c.c.waitServing([]int{i}, time.Now().Add(startTimeout))
	}
	if err != nil {
		c.tb.Fatalf("zktest: restart node %d: %v", i, err)
	}
}

// Leader returns the index of the node whose srvr Mode is leader (or
// standalone), or -1 if no node reports it right now.
func (c *Cluster) Leader() int {
	for i := range c.c.servers {
		if m := c.Mode(i); m == "leader" || m == "standalone" {
			return i
		}
	}
	return -1
}

// Mode returns node i's srvr Mode (leader, follower, observer or
// standalone), or "" if it does not answer or does not serve requests.
func (c *Cluster) Mode(i int) string { return mode(c.c.servers[i]) }

// Root returns a znode path unique to this call, "/t-<test name>-<random
// hex>", for the test to build its tree under. It does not create it.
func Root(tb testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '-'
	}, tb.Name())
	if len(name) > 80 {
		name = name[:80]
	}
	var b [6]byte
	rand.Read(b[:])
	return "/t-" + name + "-" + hex.EncodeToString(b[:])
}

// Connect opens a zk connection to servers and returns once it has a
// session, failing the test if that takes more than 30 s. The connection
// logs nothing and is closed in tb.Cleanup.
func Connect(tb testing.TB, servers []string, sessionTimeout time.Duration) *zk.Conn {
	tb.Helper()
	conn, _ := ConnectEvents(tb, servers, sessionTimeout)
	return conn
}

// ConnectEvents is Connect that also returns the connection's session
// events; the StateHasSession event of the first session is already
// consumed.
func ConnectEvents(tb testing.TB, servers []string, sessionTimeout time.Duration) (*zk.Conn, *Events) {
	tb.Helper()
	ev := &Events{notify: make(chan struct{})}
	// The wire keeps the last zxid, so that a test's client reconnecting
	// under watches has no data race in go-zookeeper (see internal/zkwire).
	var zxids zkwire.Zxids
	dial := func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := net.DialTimeout(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return zxids.Wrap(c), nil
	}
	conn, _, err := zk.Connect(servers, sessionTimeout, zk.WithLogger(nopLogger{}), zk.WithEventCallback(ev.record), zk.WithDialer(dial))
	if err != nil {
		tb.Fatalf("zktest: connect %v: %v", servers, err)
	}
	tb.Cleanup(conn.Close)
	ev.Wait(tb, zk.StateHasSession, 30*time.Second)
	return conn, ev
}

// Events records every session event (zk.EventSession) of a connection in
// order, never blocking the client and never dropping one (unlike the
// channel returned by zk.Connect, which drops events when full).
type Events struct {
	mu     sync.Mutex
	evs    []zk.Event
	next   int           // first event Wait has not consumed
	notify chan struct{} // closed and replaced on every recorded event
}

func (e *Events) record(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	close(e.notify)
	e.notify = make(chan struct{})
	e.mu.Unlock()
}

// Wait consumes recorded events, oldest first, up to and including the
// first one in the given state, and returns it. It fails the test if no
// such event arrives within timeout. Call it from the test's goroutine.
func (e *Events) Wait(tb testing.TB, state zk.State, timeout time.Duration) zk.Event {
	tb.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		e.mu.Lock()
		for e.next < len(e.evs) {
			ev := e.evs[e.next]
			e.next++
			if ev.State == state {
				e.mu.Unlock()
				return ev
			}
		}
		notify := e.notify
		e.mu.Unlock()
		select {
		case <-notify:
		case <-timer.C:
			tb.Fatalf("zktest: no %v event within %v; session events so far: %v", state, timeout, e.states())
			return zk.Event{}
		}
	}
}

func (e *Events) states() []zk.State {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := make([]zk.State, len(e.evs))
	for i, ev := range e.evs {
		s[i] = ev.State
	}
	return s
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// Dump returns every znode path under root, recursively and sorted, root
// included; nil if root does not exist. Nodes deleted while it walks are
// left out. It fails the test on any other error.
func Dump(tb testing.TB, conn *zk.Conn, root string) []string {
	tb.Helper()
	var out []string
	err := walkTree(root, func(p string) ([]string, error) {
		children, _, err := conn.Children(p)
		if err != nil {
			return nil, fmt.Errorf("children of %s: %w", p, err)
		}
		out = append(out, p)
		return children, nil
	})
	if err != nil {
		tb.Fatalf("zktest: dump %s: %v", root, err)
	}
	slices.Sort(out)
	return out
}

// walkTree reads root and every node under it, depth first: read reads node
// p and returns its children. A node found deleted (zk.ErrNoNode) is left
// out, with what was under it; any other error ends the walk.
func walkTree(root string, read func(p string) (children []string, err error)) error {
	children, err := read(root)
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, ch := range children {
		if err := walkTree(path.Join(root, ch), read); err != nil {
			return err
		}
	}
	return nil
}

// Node is one znode as Snapshot saw it: its path, its data and its stat (data,
// child and ACL versions, creation and modification zxids and times, ephemeral
// owner).
type Node struct {
	Path string
	Data string
	Stat zk.Stat
}

func (n Node) String() string {
	return fmt.Sprintf("%s data %q version %d cversion %d aversion %d czxid %d mzxid %d pzxid %d ephemeralOwner %#x",
		n.Path, n.Data, n.Stat.Version, n.Stat.Cversion, n.Stat.Aversion, n.Stat.Czxid, n.Stat.Mzxid, n.Stat.Pzxid, n.Stat.EphemeralOwner)
}

// Snapshot returns every znode under root, root included, sorted by path, each
// with its data and stat; nil if root does not exist. Nodes deleted while it
// walks are left out. Two snapshots are equal only if nothing under root was
// created, deleted, written or re-created in between (a write of the same bytes
// still moves the version, a delete and re-create the czxid). It fails the test
// on any other error.
func Snapshot(tb testing.TB, conn *zk.Conn, root string) []Node {
	tb.Helper()
	var out []Node
	err := walkTree(root, func(p string) ([]string, error) {
		data, st, err := conn.Get(p)
		if err != nil {
			return nil, fmt.Errorf("get %s: %w", p, err)
		}
		children, _, err := conn.Children(p)
		if err != nil {
			return nil, fmt.Errorf("children of %s: %w", p, err)
		}
		out = append(out, Node{Path: p, Data: string(data), Stat: *st})
		return children, nil
	})
	if err != nil {
		tb.Fatalf("zktest: snapshot %s: %v", root, err)
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// SnapshotDiff describes, one line each, the nodes that differ between two
// snapshots: "- node" gone, "+ node" new, "~ before\n  after" changed. It is
// empty when they are equal.
func SnapshotDiff(before, after []Node) string {
	var b strings.Builder
	i, j := 0, 0
	for i < len(before) || j < len(after) {
		switch {
		case j == len(after) || i < len(before) && before[i].Path < after[j].Path:
			fmt.Fprintf(&b, "- %s\n", before[i])
			i++
		case i == len(before) || after[j].Path < before[i].Path:
			fmt.Fprintf(&b, "+ %s\n", after[j])
			j++
		default:
			if before[i] != after[j] {
				fmt.Fprintf(&b, "~ %s\n  %s\n", before[i], after[j])
			}
			i++
			j++
		}
	}
	return b.String()
}

// startCore starts n servers (n == 1: standalone) and waits until they
// serve. A start that loses a port to another process is retried on new
// ports.
func startCore(n int, tlsOpt *TLS) (*core, error) {
	if _, err := os.Stat(jarPath); err != nil {
		return nil, fmt.Errorf("ZooKeeper is not installed (%s is missing); run scripts/zookeeper.sh install", jarPath)
	}
	var err error
	for range 3 {
		var c *core
		if c, err = tryStart(n, tlsOpt); err == nil || !strings.Contains(err.Error(), "Address already in use") {
			return c, err
		}
	}
	return nil, err
}

func tryStart(n int, tlsOpt *TLS) (*core, error) {
	dir, err := os.MkdirTemp("", "zktest-")
	if err != nil {
		return nil, err
	}
	c := &core{dir: dir}
	liveMu.Lock()
	live[c] = true
	liveMu.Unlock()
	fail := func(err error) (*core, error) {
		c.stop()
		return nil, err
	}
	ports, err := freePorts(4 * n)
	if err != nil {
		return fail(err)
	}
	var peers strings.Builder
	if n > 1 {
		for i := range n {
			fmt.Fprintf(&peers, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
		}
	}
	for i := range n {
		nd := &node{id: i + 1, dir: filepath.Join(dir, "node"+strconv.Itoa(i+1)), clientPort: ports[3*i]}
		if tlsOpt != nil {
			nd.securePort = ports[3*n+i]
		}
		data := filepath.Join(nd.dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return fail(err)
		}
		cfg := fmt.Sprintf("tickTime=200\ninitLimit=10\nsyncLimit=5\ndataDir=%s\n"+
			"clientPort=%d\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\n"+
			"minSessionTimeout=400\nmaxSessionTimeout=60000\n4lw.commands.whitelist=*\nforceSync=no\n%s",
			data, nd.clientPort, peers.String())
		if tlsOpt != nil {
			secure, err := tlsOpt.configure(nd)
			if err != nil {
				return fail(err)
			}
			cfg += secure
			c.secure = append(c.secure, fmt.Sprintf("127.0.0.1:%d", nd.securePort))
		}
		if err := os.WriteFile(filepath.Join(nd.dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
			return fail(err)
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(nd.id)+"\n"), 0o644); err != nil {
			return fail(err)
		}
		c.nodes = append(c.nodes, nd)
		c.servers = append(c.servers, fmt.Sprintf("127.0.0.1:%d", nd.clientPort))
	}
	all := make([]int, n)
	for i := range n {
		all[i] = i
		if err := c.nodes[i].start(); err != nil {
			return fail(err)
		}
	}
	if err := c.waitServing(all, time.Now().Add(startTimeout)); err != nil {
		return fail(err)
	}
	return c, nil
}

// waitServing polls until every node in idx serves (standalone, or leader
// or follower with exactly one leader among idx), a node exits, or the
// deadline passes; errors carry the tail of the logs concerned.
func (c *core) waitServing(idx []int, deadline time.Time) error {
	for {
		leaders, ready := 0, true
		for _, i := range idx {
			serving, leader, err := c.nodeServing(i)
			if err != nil {
				return err
			}
			if !serving {
				ready = false
				break
			}
			if leader {
				leaders++
			}
		}
		if ready && (len(c.nodes) == 1 || len(idx) < len(c.nodes) || leaders == 1) {
			return nil
		}
		if time.Now().After(deadline) {
			return c.notServing(idx)
		}
		time.Sleep(pollInterval)
	}
}

// nodeServing tells whether node i serves (answers ruok, listens on its
// secure port when it has one, and is standalone, leader or follower) and
// whether it leads; an error when the node has exited.
func (c *core) nodeServing(i int) (serving, leader bool, err error) {
	nd := c.nodes[i]
	select {
	case <-nd.exitCh():
		return false, false, fmt.Errorf("node %d (%s) exited while starting; log tail:\n%s", i, c.servers[i], nd.logTail())
	default:
	}
	if ruok(c.servers[i]) != "imok" || nd.securePort != 0 && !listening(c.secure[i]) {
		return false, false, nil
	}
	switch mode(c.servers[i]) {
	case "standalone", "follower":
		return true, false, nil
	case "leader":
		return true, true, nil
	}
	return false, false, nil
}

// notServing is waitServing's error: each node's mode and log tail.
func (c *core) notServing(idx []int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "not serving after %v", startTimeout)
	for _, i := range idx {
		fmt.Fprintf(&b, "\n--- node %d (%s) mode %q, log tail:\n%s", i, c.servers[i], mode(c.servers[i]), c.nodes[i].logTail())
	}
	return errors.New(b.String())
}

// stop kills every node, forgets c and removes its directory. Idempotent.
func (c *core) stop() {
	for _, nd := range c.nodes {
		nd.kill()
	}
	liveMu.Lock()
	delete(live, c)
	liveMu.Unlock()
	if c.dir != "" {
		os.RemoveAll(c.dir)
	}
}

func (nd *node) start() error {
	logf, err := os.OpenFile(filepath.Join(nd.dir, "zookeeper.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own copy
	cp := jarPath
	if _, err := os.Stat(slf4jPath); err == nil {
		cp += ":" + slf4jPath
	}
	args := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-Dzookeeper.log.dir=" + nd.dir}
	if nd.securePort != 0 {
		cp += ":" + strings.Join(nettyJars, ":")
		args = append(args, "-Dzookeeper.serverCnxnFactory="+nettyFactory)
	}
	args = append(args, "-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(nd.dir, "zoo.cfg"))
	cmd := exec.Command("java", args...)
	cmd.Dir = nd.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start java: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	nd.mu.Lock()
	nd.cmd, nd.exited = cmd, exited
	nd.mu.Unlock()
	return nil
}

// exitCh returns a channel closed once the current process has exited
// (already closed if the node never started).
func (nd *node) exitCh() <-chan struct{} {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.exited == nil {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return nd.exited
}

// kill sends SIGKILL and waits until the process has been reaped.
func (nd *node) kill() {
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill() // through a pidfd: never hits a recycled pid
	<-exited
}

// stop sends SIGTERM and waits until the process has been reaped, killing it
// if it has not exited within grace.
func (nd *node) stop(grace time.Duration) {
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(grace):
		cmd.Process.Kill()
		<-exited
	}
}

func (nd *node) logTail() string {
	f, err := os.Open(filepath.Join(nd.dir, "zookeeper.log"))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if lines = append(lines, sc.Text()); len(lines) > 40 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct ports that were free on 127.0.0.1 a moment ago.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close() // held until all are chosen, so they differ
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// fourLetter sends a four-letter word and returns the whole answer.
func fourLetter(addr, word string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(conn, word); err != nil {
		return "", err
	}
	b, err := io.ReadAll(conn)
	return string(b), err
}

func ruok(addr string) string {
	s, _ := fourLetter(addr, "ruok")
	return s
}

func mode(addr string) string {
	s, err := fourLetter(addr, "srvr")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(s, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// WatchedPaths counts the znodes at or under prefix that the server at addr holds
// at least one data or existence watch on (from its `wchp` report, which leaves
// out child watches), whoever set them. Watches are
// per path and per session, so a client that sets the same watch again does not
// add one; this counts what a recipe costs the server.
func WatchedPaths(tb testing.TB, addr, prefix string) int {
	tb.Helper()
	out, err := fourLetter(addr, "wchp")
	if err != nil {
		tb.Fatalf("zktest: wchp on %s: %v", addr, err)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if line == prefix || strings.HasPrefix(line, prefix+"/") {
			n++
		}
	}
	return n
}

// Received counts the requests (pings included) the server at addr has received
// on the connection of session sid ("0x..." as the sidecar reports it), from its
// `cons` report; 0 when that session has no connection there.
func Received(tb testing.TB, addr, sid string) int64 {
	tb.Helper()
	out, err := fourLetter(addr, "cons")
	if err != nil {
		tb.Fatalf("zktest: cons on %s: %v", addr, err)
	}
	want, err := strconv.ParseUint(strings.TrimPrefix(sid, "0x"), 16, 64)
	if err != nil {
		tb.Fatalf("zktest: session id %q: %v", sid, err)
	}
	for _, line := range strings.Split(out, "\n") {
		var recved int64 = -1
		var got uint64
		found := false
		_, stats, ok := strings.Cut(line, "(")
		if !ok {
			continue
		}
		for _, f := range strings.Split(strings.TrimSuffix(strings.TrimSpace(stats), ")"), ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "recved":
				recved, _ = strconv.ParseInt(v, 10, 64)
			case "sid":
				got, err = strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64)
				found = err == nil
			}
		}
		if found && got == want && recved >= 0 {
			return recved
		}
	}
	return 0
}

// ServerReceived is the number of requests the server at addr has received (its
// `srvr` report's Received count: every client's requests and pings). The
// difference between two readings around some work, with nothing else talking
// to the server, is what that work costs the server in requests.
func ServerReceived(tb testing.TB, addr string) int64 {
	tb.Helper()
	out, err := fourLetter(addr, "srvr")
	if err != nil {
		tb.Fatalf("zktest: srvr on %s: %v", addr, err)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "Received: "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				tb.Fatalf("zktest: srvr on %s: %q: %v", addr, line, err)
			}
			return n
		}
	}
	tb.Fatalf("zktest: srvr on %s has no Received line:\n%s", addr, out)
	return 0
}
