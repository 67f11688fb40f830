package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/statedir"
)

// The planned upgrade (README, "Restarts and upgrades"): on SIGUSR2 the running sidecar
// starts its successor (the binary now at its own path, with its flags and
// environment), hands it the listening socket as an inherited descriptor, and
// once the successor has taken it, stops: it stops accepting (connections wait
// in the socket's backlog, which the successor shares, so none is refused),
// ends streams with a retry hint, answers waits 503 with Retry-After (their
// nodes deleted as at any cancelled wait), writes its last state, detaches its
// ZooKeeper session without closing it and lets go of the state directory.
// The successor, blocked until then on the directory, resumes the session and
// the leases from it, as after a crash, and serves. The pid file names the old
// process until the successor owns the directory and writes its own pid over
// it; the old process exits only then, so that a supervisor that reads the
// pid file when its main process exits finds the successor there (systemd's
// PIDFile=: deploy/systemd). If the successor ends before that, the old
// process exits 1, so that a supervisor restarts the sidecar (which resumes
// from the state directory).
//
// Why not github.com/cloudflare/tableflip: the hand-over here is one socket,
// and its order is set by the state directory's lock (the successor may only
// load the state once the old process has written its last and detached), not
// by the successor's readiness alone; passing the descriptor and one readiness
// byte takes fewer lines than adapting tableflip's upgrade protocol.

// The environment of a successor started by Upgrade: the inherited listening
// socket's descriptor and the pipe on which it says it has taken it.
const (
	envInheritedListener = "COORD_INHERITED_LISTENER"
	envUpgradeReady      = "COORD_UPGRADE_READY"
	// envInheritedAdmin is the admin listener's descriptor (--admin-listen).
	envInheritedAdmin = "COORD_INHERITED_ADMIN_LISTENER"
)

// handOverTimeout bounds each wait of a hand-over: for the successor to take
// the socket, and for the successor to get the state directory.
const handOverTimeout = 30 * time.Second

// handOverIdle is how long a connection must have been idle before a
// hand-over closes it under its client (see handOver): a client sending at
// least twice a second has its next request answered, with Connection:
// close, first.
const handOverIdle = 500 * time.Millisecond

// exePath is the binary's path at start: Upgrade runs what is at that path
// then (os.Executable would name the replaced, deleted file).
var exePath = func() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}()

// ErrSuccessorLost is Upgrade's error when everything was handed over but
// the successor ended (or did not own the state directory within
// handOverTimeout) before naming itself in the pid file: nobody serves, and
// the caller exits with a failure for its supervisor to restart it.
var ErrSuccessorLost = errors.New("upgrade: handed over, but the successor did not take the state directory")

// Upgrade starts the successor and, once it has taken the listening socket,
// hands everything over (see above) and waits until the pid file names the
// successor; the caller then exits. An error other than ErrSuccessorLost
// means the successor could not start or take the socket: this process keeps
// serving and nothing was handed over. Once the socket is taken, Upgrade
// hands over whatever happens on the way (printed) and returns nil, or
// ErrSuccessorLost.
func (m *Main) Upgrade() error {
	if m.restarts == nil {
		return errors.New("an upgrade needs --state-dir: the successor resumes the session from it")
	}
	file, err := listenerFile(m.listener)
	if err != nil {
		return err
	}
	defer file.Close()
	ready, readyW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer ready.Close()
	cmd := exec.Command(exePath, os.Args[1:]...)
	cmd.Env = append(os.Environ(), envInheritedListener+"=3", envUpgradeReady+"=4")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{file, readyW}
	if m.adminListener != nil {
		admin, err := listenerFile(m.adminListener)
		if err != nil {
			readyW.Close()
			return err
		}
		defer admin.Close()
		cmd.Env = append(cmd.Env, envInheritedAdmin+"=5")
		cmd.ExtraFiles = append(cmd.ExtraFiles, admin)
	}
	if err := cmd.Start(); err != nil {
		readyW.Close()
		return fmt.Errorf("start the successor %s: %w", exePath, err)
	}
	readyW.Close()
	ended := make(chan struct{})
	go func() { _ = cmd.Wait(); close(ended) }() // reaped; it outlives this process
	taken := make(chan error, 1)
	go func() {
		var b [1]byte
		_, err := ready.Read(b[:])
		taken <- err
	}()
	select {
	case err := <-taken:
		if err != nil {
			return fmt.Errorf("the successor (pid %d) ended before taking the socket: %w", cmd.Process.Pid, err)
		}
	case <-time.After(handOverTimeout):
		_ = cmd.Process.Kill()
		return fmt.Errorf("the successor (pid %d) did not take the socket within %s", cmd.Process.Pid, handOverTimeout)
	}
	m.log.Info("upgrade: the successor took the socket; handing over", "successor", cmd.Process.Pid)
	if err := m.handOver(); err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar: upgrade: handed over, with an error on the way:", err)
	}
	return awaitSuccessorPID(m.restarts.dir.Path(), cmd.Process.Pid, ended)
}

// awaitSuccessorPID returns nil once the state directory's pid file names
// pid, the successor; ErrSuccessorLost if ended closes (the successor exited)
// or handOverTimeout passes first.
func awaitSuccessorPID(dir string, pid int, ended <-chan struct{}) error {
	deadline := time.NewTimer(handOverTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if got, err := statedir.ReadPID(dir); err == nil && got == pid {
			return nil
		}
		select {
		case <-ended:
			return fmt.Errorf("%w: it exited", ErrSuccessorLost)
		case <-deadline.C:
			return fmt.Errorf("%w within %s", ErrSuccessorLost, handOverTimeout)
		case <-tick.C:
		}
	}
}

// listenerFile is a duplicate of the listening socket's descriptor. A unix
// socket's file is left in place when this process closes its listener.
func listenerFile(ln net.Listener) (*os.File, error) {
	switch l := ln.(type) {
	case *net.TCPListener:
		return l.File()
	case *net.UnixListener:
		l.SetUnlinkOnClose(false)
		return l.File()
	}
	return nil, fmt.Errorf("cannot hand over a %T", ln)
}

// handOver stops this process in favour of its successor: the HTTP side first
// as at a shutdown (stopHTTP: streams end with a retry hint, waits answer 503,
// nothing more is accepted, the short requests under way are answered), then
// the last state is written, the session detached (its ephemeral nodes live
// on for the successor), and the state directory let go, which is the
// successor's signal to resume.
func (m *Main) handOver() error {
	var err error
	m.closeOnce.Do(func() {
		defer m.logOut.Close()
		err = m.stopHTTP(m.server.Drain) // the successor shares the socket's backlog: none is refused
		m.server.HandOver()
		m.restarts.handOver(m.session)
		m.leases.Wait()
		m.server.CloseRecipes()
		m.closeErr = err
	})
	return err
}

// inheritedListeners are the listening sockets a predecessor handed over
// (nil when this process was not started by an upgrade): the main one and the
// admin one (nil when the predecessor had none), and a function that tells
// the predecessor they have been taken.
func inheritedListeners() (net.Listener, net.Listener, func(), error) {
	ln, err := inheritedFD(envInheritedListener, "inherited-listener")
	if err != nil || ln == nil {
		return nil, nil, func() {}, err
	}
	admin, err := inheritedFD(envInheritedAdmin, "inherited-admin-listener")
	if err != nil {
		ln.Close()
		return nil, nil, nil, err
	}
	tell := func() {}
	if readyText := os.Getenv(envUpgradeReady); readyText != "" {
		os.Unsetenv(envUpgradeReady)
		if rfd, err := strconv.Atoi(readyText); err == nil {
			w := os.NewFile(uintptr(rfd), "upgrade-ready")
			tell = func() { _, _ = w.Write([]byte{1}); w.Close() }
		}
	}
	return ln, admin, tell, nil
}

// inheritedFD is the listening socket whose descriptor the environment
// variable env names (nil when it is not set), which it unsets.
func inheritedFD(env, name string) (net.Listener, error) {
	fdText := os.Getenv(env)
	if fdText == "" {
		return nil, nil
	}
	os.Unsetenv(env)
	fd, err := strconv.Atoi(fdText)
	if err != nil {
		return nil, fmt.Errorf("%s=%q: %w", env, fdText, err)
	}
	f := os.NewFile(uintptr(fd), name)
	ln, err := net.FileListener(f)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("the %s: %w", name, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true) // it is this process's to remove at its end now
	}
	return ln, nil
}

// openStateDir takes the state directory: at once, or, for the successor of
// an upgrade, once the predecessor lets go of it (within handOverTimeout).
func openStateDir(path string, upgrading bool, opts ...statedir.Option) (*statedir.Dir, error) {
	if !upgrading {
		return statedir.Open(path, opts...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), handOverTimeout)
	defer cancel()
	return statedir.OpenWait(ctx, path, opts...)
}

// connStates tracks the accepted connections' states (http.Server's
// ConnState hook), so that a hand-over can wait for every connection that may
// still bring a request: one accepted whose first request has not been read,
// and one that answered a request a moment ago (a busy client's next request
// may be on its way). Closing either under its client loses that request: the
// client wrote it, and cannot know whether it was served.
//
// It also counts the idle ones (coord_http_connections) and closes the
// longest-idle to make room at --max-conns (conns.go).
type connStates struct {
	// mu guards conns, the lists and every entry's fields: a transition is
	// a map lookup and a list move under it, and finding the connection to
	// close at the cap is the head of a list, not a scan of every connection
	// (which, at each accept at the cap, made the accept loop the bottleneck
	// under pressure, docs/BENCHMARKS.md).
	mu    sync.Mutex
	conns map[net.Conn]*connEntry // open and not hijacked
	// idle holds the entries in http.StateIdle, fresh those in
	// http.StateNew, each in the order they entered it: the longest in it
	// first.
	idle, fresh connList
}

// connEntry is a connection's last state and when it began (Unix
// nanoseconds), and its place in its state's list (if any).
type connEntry struct {
	conn       net.Conn
	state      http.ConnState
	since      int64
	list       *connList
	prev, next *connEntry
}

// connList is a doubly linked list of entries, oldest first.
type connList struct {
	head, tail *connEntry
	n          int
}

func (l *connList) push(e *connEntry) {
	e.list, e.prev, e.next = l, l.tail, nil
	if l.tail != nil {
		l.tail.next = e
	} else {
		l.head = e
	}
	l.tail = e
	l.n++
}

// unlink takes e out of the list it is in, if any.
func (e *connEntry) unlink() {
	l := e.list
	if l == nil {
		return
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.list, e.prev, e.next = nil, nil, nil
	l.n--
}

// track is http.Server's ConnState hook. A connection chosen by reclaimIdle
// stays stateReclaimed (it is being closed) until it is gone.
func (c *connStates) track(conn net.Conn, st http.ConnState) {
	now := time.Now().UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.conns[conn]
	switch st {
	case http.StateClosed, http.StateHijacked:
		if e != nil {
			e.unlink()
			e.state = stateGone
			delete(c.conns, conn)
		}
		return
	}
	if e == nil {
		if c.conns == nil {
			c.conns = make(map[net.Conn]*connEntry)
		}
		e = &connEntry{conn: conn}
		c.conns[conn] = e
	} else if e.state == stateReclaimed {
		return
	}
	e.unlink()
	e.state, e.since = st, now
	switch st {
	case http.StateIdle:
		c.idle.push(e)
	case http.StateNew:
		c.fresh.push(e)
	}
}

// quiet reports whether every connection is idle, and has been for at least
// d: none has a request under way or to come soon.
func (c *connStates) quiet(d time.Duration) bool {
	before := time.Now().Add(-d).UnixNano()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.conns {
		if e.state != http.StateIdle || e.since > before {
			return false
		}
	}
	return true
}

// wait returns once every connection has been idle for idle (the others have
// answered and, draining, closed), or after at most d: a client that
// connected and sends nothing, or one that keeps sending, is not waited for.
func (c *connStates) wait(idle, d time.Duration) {
	deadline := time.Now().Add(d)
	for !c.quiet(idle) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}
