package ctl

import (
	"strings"
	"testing"
)

// Every form of COORD_ADDR / --addr: URLs, HOST:PORT and unix sockets are read
// alike; anything else is refused with a message that says what is wanted.
func TestParseAddr(t *testing.T) {
	for _, c := range []struct{ in, base, socket string }{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080", ""},
		{" http://localhost:8080 ", "http://localhost:8080", ""},
		{"HTTP://Sidecar:8080", "http://Sidecar:8080", ""},
		{"https://sidecar.example:8443", "https://sidecar.example:8443", ""},
		{"https://sidecar.example", "https://sidecar.example", ""},
		{"http://gateway:80/coord/", "http://gateway:80/coord", ""},
		{"http://[::1]:8080", "http://[::1]:8080", ""},
		{"127.0.0.1:8080", "http://127.0.0.1:8080", ""},
		{"localhost:8080", "http://localhost:8080", ""},
		{"sidecar:1", "http://sidecar:1", ""},
		{":8080", "http://127.0.0.1:8080", ""},
		{"[::1]:8080", "http://[::1]:8080", ""},
		{"unix:/run/coord.sock", "http://localhost", "/run/coord.sock"},
		{"unix:///run/coord.sock", "http://localhost", "/run/coord.sock"},
		{"unix:coord.sock", "http://localhost", "coord.sock"},
	} {
		got, err := parseAddr(c.in)
		if err != nil {
			t.Errorf("parseAddr(%q): %v", c.in, err)
			continue
		}
		if got.base != c.base || got.socket != c.socket {
			t.Errorf("parseAddr(%q) = %+v, want base %q socket %q", c.in, got, c.base, c.socket)
		}
	}
	for _, c := range []struct{ in, why string }{
		{"", "empty"},
		{"   ", "empty"},
		{"localhost", "no port"},
		{"127.0.0.1", "no port"},
		{"localhost:http", `port "http"`},
		{"localhost:0", `port "0"`},
		{"localhost:65536", `port "65536"`},
		{"localhost:8080/v1", "a path needs a URL"},
		{"ftp://sidecar:21", `scheme "ftp" is not supported`},
		{"ws://sidecar:8080", `scheme "ws" is not supported`},
		{"http://", "no host"},
		{"http:///v1", "no host"},
		{"http://sidecar:99999", `port "99999"`},
		{"http://user:secret@sidecar:8080", "credentials do not belong in the address"},
		{"http://sidecar:8080/?x=1", "a query or fragment"},
		{"http://sidecar:8080/#top", "a query or fragment"},
		{"unix:", "no socket path"},
		{"unix://", "no socket path"},
		{"unix://run/coord.sock", "absolute path"},
		{"http://[::1:8080", "missing ']'"},
	} {
		_, err := parseAddr(c.in)
		if err == nil {
			t.Errorf("parseAddr(%q): accepted", c.in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, c.why) || !strings.HasSuffix(msg, AddrForms) {
			t.Errorf("parseAddr(%q): %q, want it to say %q and end with the forms wanted", c.in, msg, c.why)
		}
	}
}
