// Package transport makes the connections beneath go-zookeeper: plain TCP or
// TLS (Dialer), each wrapped for the session handshake (Handshake), which
// presents a predecessor's session to resume in the ConnectRequest, reads the
// server's ConnectResponse as it passes, and cuts the connection when the
// session is handed over (see internal/zookeeper's package doc, "Resuming a
// session").
//
// It knows nothing of the Session above it: internal/zookeeper gives it the
// configuration and is told the outcome of a resume.
package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Dialer returns how connections are made: plain TCP to the addresses the
// server names resolve to (go-zookeeper's defaults) or, with tlsConfig, a
// dialer that verifies the server against it and a host provider that hands it
// the configured host names (resolved ones would leave no name to verify).
// sessionTimeout is the requested session timeout: a TLS handshake may take
// half of it. A failed TLS connection is logged to log.
//
// Every connection's session handshake must be answered within a third of the
// session timeout (handshakeLimit; see handshakelimit.go).
func Dialer(tlsConfig *tls.Config, sessionTimeout time.Duration, log *slog.Logger) (zk.Dialer, zk.HostProvider) {
	limit := handshakeLimit(sessionTimeout)
	if tlsConfig == nil {
		return func(network, address string, timeout time.Duration) (net.Conn, error) {
			c, err := net.DialTimeout(network, address, timeout)
			if err != nil {
				return nil, err
			}
			return limitHandshake(c, limit), nil
		}, zk.NewDNSHostProvider()
	}
	d := &tlsDialer{cfg: tlsConfig, sessionTimeout: sessionTimeout, log: log}
	return func(network, address string, timeout time.Duration) (net.Conn, error) {
		c, err := d.dial(network, address, timeout)
		if err != nil {
			return nil, err
		}
		return limitHandshake(c, limit), nil
	}, &staticHosts{}
}

// tlsDialer makes the TLS connections of one client.
type tlsDialer struct {
	cfg            *tls.Config
	sessionTimeout time.Duration
	log            *slog.Logger
}

// dial opens a TCP connection within timeout (go-zookeeper's, 1s) and
// completes the TLS handshake within half the session timeout (at least that).
// The server's certificate must be signed by the configured CA and name the
// host of the address dialed (unless the configuration sets ServerName).
func (d *tlsDialer) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	cfg := d.cfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, d.sessionTimeout/2))
	defer cancel()
	td := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	c, err := td.DialContext(ctx, network, address)
	if err != nil {
		d.log.Warn("zookeeper TLS connection failed", "server", address, "err", err)
		return nil, err
	}
	return c, nil
}

// staticHosts is a zk.HostProvider that tries the configured servers as given
// (host names unresolved, in the order zk.Connect shuffled them), round robin.
type staticHosts struct {
	mu        sync.Mutex
	servers   []string
	curr      int
	connected int // index of the last server connected to; -1 none since the last round
}

func (h *staticHosts) Init(servers []string) error {
	if len(servers) == 0 {
		return errors.New("no ZooKeeper servers given")
	}
	for _, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("ZooKeeper server %q: %w", s, err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servers = append([]string(nil), servers...)
	h.curr, h.connected = -1, -1
	return nil
}

func (h *staticHosts) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.servers)
}

// Next returns the next server; retryStart is true once every server has been
// tried since the last successful connection.
func (h *staticHosts) Next() (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.curr = (h.curr + 1) % len(h.servers)
	retryStart := h.curr == h.connected
	if h.connected == -1 {
		h.connected = 0 // the first round ends back at the first server
		retryStart = false
	}
	return h.servers[h.curr], retryStart
}

func (h *staticHosts) Connected() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.connected = h.curr
}
