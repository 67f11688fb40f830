package ctl

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// AddrForms says which forms of --addr / COORD_ADDR are understood; every error
// about an address ends with it.
const AddrForms = "want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH/TO.SOCK"

// sidecarAddr is where the subcommands reach a running sidecar: the URL every
// request path is appended to and, for a unix socket, the socket's path (the
// requests then go to http://localhost over that socket).
type sidecarAddr struct {
	base   string // scheme://host[:port][/prefix], no trailing slash
	socket string // "" for TCP
}

// parseAddr reads an address as COORD_ADDR and --addr take it, the same in the
// subcommands and in every example:
//
//	http://127.0.0.1:8080   a URL (a path prefix is kept, a trailing slash dropped)
//	https://sidecar:8443    the same over TLS
//	127.0.0.1:8080          HOST:PORT means http://HOST:PORT (":8080": 127.0.0.1)
//	unix:/run/coord.sock    a unix socket (also unix:///run/coord.sock)
//
// Anything else is refused with an error that says what is wanted.
func parseAddr(s string) (sidecarAddr, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return sidecarAddr{}, badAddr(s, "empty")
	case hasPrefixFold(s, "unix:"):
		return parseUnixAddr(s)
	case strings.Contains(s, "://"):
		return parseURLAddr(s)
	default:
		return parseHostPortAddr(s)
	}
}

// badAddr is the error about address s: why it is refused, then what is wanted.
func badAddr(s, why string) error {
	return fmt.Errorf("address %q: %s; %s", s, why, AddrForms)
}

// parseUnixAddr reads unix:/PATH or unix:///PATH.
func parseUnixAddr(s string) (sidecarAddr, error) {
	path := s[len("unix:"):]
	if strings.HasPrefix(path, "//") { // unix:///run/coord.sock
		path = path[2:]
		if path != "" && !strings.HasPrefix(path, "/") {
			return sidecarAddr{}, badAddr(s, "unix:// must be followed by an absolute path")
		}
	}
	if path == "" {
		return sidecarAddr{}, badAddr(s, "no socket path after unix:")
	}
	return sidecarAddr{base: "http://localhost", socket: path}, nil
}

// parseURLAddr reads an http:// or https:// URL; a path prefix is kept without
// its trailing slash.
func parseURLAddr(s string) (sidecarAddr, error) {
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return sidecarAddr{}, badAddr(s, err.Error())
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return sidecarAddr{}, badAddr(s, fmt.Sprintf("scheme %q is not supported", u.Scheme))
	}
	if u.Host == "" {
		return sidecarAddr{}, badAddr(s, "no host")
	}
	if u.User != nil {
		return sidecarAddr{}, badAddr(s, "credentials do not belong in the address (use --token or COORD_TOKEN)")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return sidecarAddr{}, badAddr(s, "a query or fragment cannot be a prefix of request paths")
	}
	if p := u.Port(); p != "" {
		if err := checkPort(p); err != nil {
			return sidecarAddr{}, badAddr(s, err.Error())
		}
	}
	return sidecarAddr{base: u.Scheme + "://" + u.Host + strings.TrimRight(u.EscapedPath(), "/")}, nil
}

// parseHostPortAddr reads HOST:PORT as http://HOST:PORT (an empty HOST is
// 127.0.0.1).
func parseHostPortAddr(s string) (sidecarAddr, error) {
	if strings.ContainsAny(s, "/?#") {
		return sidecarAddr{}, badAddr(s, "a path needs a URL")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return sidecarAddr{}, badAddr(s, "no port")
	}
	if err := checkPort(port); err != nil {
		return sidecarAddr{}, badAddr(s, err.Error())
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if strings.ContainsAny(host, "/?#@ ") {
		return sidecarAddr{}, badAddr(s, fmt.Sprintf("host %q", host))
	}
	return sidecarAddr{base: "http://" + net.JoinHostPort(host, port)}, nil
}

func checkPort(p string) error {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func (a sidecarAddr) String() string {
	if a.socket != "" {
		return "unix:" + a.socket
	}
	return a.base
}
