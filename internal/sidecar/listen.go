package sidecar

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The sidecar's own listener: TCP or a unix socket, a cap on open connections,
// and HTTPS whose certificate files are re-read when they change.

// listen binds the listener. A unix socket gets mode 0660 (its owner and group
// may connect); a socket file left by a process that is gone is removed first,
// while one that a live process answers on is an error, as is any other file
// at that path. The socket file is removed when the listener closes.
func listen(network, address string) (net.Listener, error) {
	if network != "unix" {
		return net.Listen(network, address)
	}
	if address == "" {
		return nil, errors.New("--listen unix:PATH: no path")
	}
	if fi, err := os.Lstat(address); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("--listen unix:%s: the file exists and is not a socket", address)
		}
		if c, err := net.DialTimeout("unix", address, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("--listen unix:%s: another process is serving on it", address)
		}
		if err := os.Remove(address); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--listen unix:%s: removing the stale socket: %w", address, err)
		}
	}
	ln, err := net.Listen("unix", address)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	if err := os.Chmod(address, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("--listen unix:%s: %w", address, err)
	}
	return ln, nil
}

// limitListener keeps at most n connections open at once. Past n, the
// connection just accepted waits for a place: reclaim (if not nil) is asked to
// close the longest-idle connection to make room at once, and asked again
// every reclaimPoll while none is idle and none closes; atCap is told each
// time the cap is met. Later clients wait in the kernel's backlog meanwhile
// (as under golang.org/x/net/netutil.LimitListener). A hijacked connection (an
// event stream) holds its place until it is closed. A connection reclaimed
// (limitedConn.reclaim) gives its place up at once, before its server
// goroutine has closed it: at most maxClosing(n) such connections may be
// still closing, beyond which reclaiming one waits for its close.
func limitListener(l net.Listener, n int, reclaim func() bool, atCap func()) *limitedListener {
	return &limitedListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{}), reclaim: reclaim, atCap: atCap,
		maxClosing: maxClosing(n)}
}

// maxClosing is how many connections reclaimed at the cap may be still
// closing (their descriptors open, their places given up) under a cap of n:
// half of it, and at least 64. Their goroutines need only be scheduled once
// to close them, but on a loaded host that took up to a few hundred
// milliseconds; under 3,500 abusers on a cap of 1,500, a bound of an eighth
// was met at a third of the reclaims, each of which then waited for its
// close in the accept loop (docs/BENCHMARKS.md).
func maxClosing(n int) int64 { return int64(max(64, n/2)) }

// reclaimPoll is how often a connection waiting for a place at the cap asks
// again for an idle one to close.
const reclaimPoll = 50 * time.Millisecond

type limitedListener struct {
	net.Listener
	sem        chan struct{}
	closeOnce  sync.Once
	done       chan struct{}
	reclaim    func() bool
	atCap      func()
	closing    atomic.Int64 // reclaimed connections not yet closed
	maxClosing int64
}

func (l *limitedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := l.place(); err != nil {
		c.Close()
		return nil, err
	}
	return &limitedConn{Conn: c, l: l}, nil
}

// place takes a place for a connection just accepted, making room at the cap
// (see limitListener); net.ErrClosed once the listener is closed.
func (l *limitedListener) place() error {
	select {
	case l.sem <- struct{}{}:
		return nil
	default:
	}
	if l.atCap != nil {
		l.atCap()
	}
	tick := time.NewTicker(reclaimPoll)
	defer tick.Stop()
	for {
		if l.reclaim != nil {
			l.reclaim() // a place is free once it returns true
		}
		select {
		case l.sem <- struct{}{}:
			return nil
		case <-l.done:
			return net.ErrClosed
		case <-tick.C:
		}
	}
}

// open is the number of connections holding a place.
func (l *limitedListener) open() int { return len(l.sem) }

func (l *limitedListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitedConn struct {
	net.Conn
	l       *limitedListener
	once    sync.Once    // the place given up
	closing atomic.Int32 // connOpen, connReclaimed or connClosed
}

// A limitedConn's closing states.
const (
	connOpen int32 = iota
	connReclaimed
	connClosed
)

// SyscallConn is the connection's own, so that the event streams' reaper can
// peek at it to notice a client that went away.
func (c *limitedConn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	if c.closing.Swap(connClosed) == connReclaimed {
		c.l.closing.Add(-1)
	}
	c.release()
	return err
}

func (c *limitedConn) release() { c.once.Do(func() { <-c.l.sem }) }

// reclaim ends the connection to make room at the cap without waiting for
// its server goroutine: net.Conn.Close waits until a read under way on the
// connection has returned, so closing an idle connection from the accept
// loop took the time its goroutine needed to be scheduled, and on a loaded
// host the accept loop spent most of its time there while new clients waited
// in the backlog (docs/BENCHMARKS.md, the connections row). Instead, every
// read and write on it fails from now on (a deadline in the past wakes one
// under way, and the deadline can no longer be moved), so its server
// goroutine closes it soon; its place is free once reclaim returns. Past
// maxClosing such connections still open, it closes the connection itself.
func (c *limitedConn) reclaim() {
	if c.l.closing.Add(1) > c.l.maxClosing {
		c.l.closing.Add(-1)
		_ = c.Close()
		return
	}
	if !c.closing.CompareAndSwap(connOpen, connReclaimed) {
		c.l.closing.Add(-1) // closed meanwhile: its place is free
		return
	}
	_ = c.Conn.SetDeadline(deadlinePassed)
	c.release()
}

// deadlinePassed is a deadline long past.
var deadlinePassed = time.Unix(1, 0)

func (c *limitedConn) reclaimed() bool { return c.closing.Load() == connReclaimed }

func (c *limitedConn) Read(b []byte) (int, error) {
	if c.reclaimed() {
		return 0, os.ErrDeadlineExceeded
	}
	return c.Conn.Read(b)
}

func (c *limitedConn) Write(b []byte) (int, error) {
	if c.reclaimed() {
		return 0, os.ErrDeadlineExceeded
	}
	return c.Conn.Write(b)
}

func (c *limitedConn) SetDeadline(t time.Time) error {
	if c.reclaimed() {
		return nil
	}
	return c.Conn.SetDeadline(t)
}

func (c *limitedConn) SetReadDeadline(t time.Time) error {
	if c.reclaimed() {
		return nil
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *limitedConn) SetWriteDeadline(t time.Time) error {
	if c.reclaimed() {
		return nil
	}
	return c.Conn.SetWriteDeadline(t)
}

// certFiles serves the certificate of --tls-cert/--tls-key and checks clients
// against --tls-client-ca, re-reading a file whenever its modification time or
// size changed since it was read (checked at each handshake, a stat per file).
// A file that fails to load (half written while it is replaced) leaves the
// previous one in force, with a warning, and is tried again at the next
// handshake.
type certFiles struct {
	certFile, keyFile, caFile string
	log                       *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	certSig [2]fileSig // cert, key
	pool    *x509.CertPool
	caSig   fileSig
}

type fileSig struct {
	mod  time.Time
	size int64
}

func sigOf(path string) (fileSig, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileSig{}, err
	}
	return fileSig{fi.ModTime(), fi.Size()}, nil
}

// newCertFiles loads the files once: a problem with them now is an error.
func newCertFiles(certFile, keyFile, caFile string, log *slog.Logger) (*certFiles, error) {
	c := &certFiles{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log}
	if err := c.refresh(); err != nil {
		return nil, err
	}
	return c, nil
}

// refresh re-reads the files that changed; it keeps what it had on an error.
func (c *certFiles) refresh() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := errors.Join(c.refreshCert(), c.refreshCA())
	if err != nil && c.cert != nil {
		c.log.Warn("tls: keeping the files in force", "err", err)
	}
	return err
}

// refreshCert re-reads the certificate and its key when either changed (c.mu
// held); it keeps what it had on an error.
func (c *certFiles) refreshCert() error {
	cs, err1 := sigOf(c.certFile)
	ks, err2 := sigOf(c.keyFile)
	if err := errors.Join(err1, err2); err != nil {
		return err
	}
	if c.cert != nil && [2]fileSig{cs, ks} == c.certSig {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	if c.cert != nil {
		c.log.Info("tls: certificate reloaded", "file", c.certFile)
	}
	c.cert, c.certSig = &cert, [2]fileSig{cs, ks}
	return nil
}

// refreshCA re-reads the client CA, when there is one and it changed (c.mu
// held); it keeps what it had on an error.
func (c *certFiles) refreshCA() error {
	if c.caFile == "" {
		return nil
	}
	as, err := sigOf(c.caFile)
	if err != nil {
		return err
	}
	if c.pool != nil && as == c.caSig {
		return nil
	}
	pem, err := os.ReadFile(c.caFile)
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(bytes.TrimSpace(pem)) {
		err = errors.New("no PEM certificate in it")
	}
	if err != nil {
		return fmt.Errorf("--tls-client-ca %s: %w", c.caFile, err)
	}
	if c.pool != nil {
		c.log.Info("tls: client CA reloaded", "file", c.caFile)
	}
	c.pool, c.caSig = pool, as
	return nil
}

func (c *certFiles) current() (*tls.Certificate, *x509.CertPool) {
	_ = c.refresh()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cert, c.pool
}

// config is the listener's TLS configuration: TLS 1.2 at least, HTTP/1.1 (the
// event streams hand their connection over to a small writer), and with a client
// CA, a client certificate it signed is required.
func (c *certFiles) config() *tls.Config {
	base := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := c.current()
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.Certificates = []tls.Certificate{*cert}
		if pool != nil {
			cfg.ClientCAs = pool
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
		return cfg, nil
	}
	return base
}
