package zookeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Credentials are ZooKeeper authentication data, as kazoo's auth_data and
// Curator's authorization: Scheme "digest" with Auth "user:password".
type Credentials struct {
	Scheme string
	Auth   string
}

// ParseCredentials reads "scheme:auth" ("digest:user:password").
func ParseCredentials(s string) (Credentials, error) {
	scheme, auth, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || scheme == "" || auth == "" {
		return Credentials{}, errors.New(`want "digest:user:password"`)
	}
	if scheme == "digest" && !strings.Contains(auth, ":") {
		return Credentials{}, errors.New(`digest credentials are "digest:user:password"`)
	}
	return Credentials{Scheme: scheme, Auth: auth}, nil
}

var (
	openACL    = zk.WorldACL(zk.PermAll)
	creatorACL = zk.AuthACL(zk.PermAll) // CREATOR_ALL_ACL: the ids the creating session authenticated as
)

// acl is the ACL of every node the sidecar creates, parents and the root
// included: creator-only when the Session has credentials (every session
// authenticated with the same credentials may do everything, anyone else
// nothing, not even read), else open to anyone.
func (s *Session) acl() []zk.ACL {
	if s.cfg.Auth != nil {
		return creatorACL
	}
	return openACL
}

// transport is how connections are made: plain TCP to the addresses the
// server names resolve to (go-zookeeper's defaults) or, over TLS, a dialer that
// verifies the server against Config.TLS and a host provider that hands it the
// configured host names (resolved ones would leave no name to verify).
func (s *Session) transport() (zk.Dialer, zk.HostProvider) {
	if s.cfg.TLS == nil {
		return net.DialTimeout, zk.NewDNSHostProvider()
	}
	return s.dialTLS, &staticHosts{}
}

// dialTLS opens a TCP connection within timeout (go-zookeeper's, 1s) and
// completes the TLS handshake within half the session timeout (at least that).
// The server's certificate must be signed by the configured CA and name the
// host of the address dialed (unless Config.TLS sets ServerName).
func (s *Session) dialTLS(network, address string, timeout time.Duration) (net.Conn, error) {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	cfg := s.cfg.TLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(timeout, s.cfg.Timeout/2))
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	c, err := d.DialContext(ctx, network, address)
	if err != nil {
		s.log.Warn("zookeeper TLS connection failed", "server", address, "err", err)
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

// authenticate adds the Session's credentials to ep's connection, retrying
// until the server has accepted them or ep is lost, then reports it (see
// apply): ep's session counts as connected only once it is authenticated, so
// no node is ever created without its creator-only ACL being satisfiable.
// go-zookeeper re-sends accepted credentials itself on every reconnect of the
// same connection, before any other request.
func (s *Session) authenticate(ep *Epoch) {
	cred := s.cfg.Auth
	for {
		err := ep.conn.AddAuth(cred.Scheme, []byte(cred.Auth))
		if err == nil {
			s.enqueueEvent(queuedEvent{ep: ep, authed: true})
			return
		}
		s.log.Debug("zookeeper: adding credentials", "err", err)
		select {
		case <-ep.lost:
			return
		case <-s.closing:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}
