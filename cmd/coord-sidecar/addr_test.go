package main

import (
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
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
		if msg := err.Error(); !strings.Contains(msg, c.why) || !strings.HasSuffix(msg, addrForms) {
			t.Errorf("parseAddr(%q): %q, want it to say %q and end with the forms wanted", c.in, msg, c.why)
		}
	}
}

// addrProxies serves car's API behind TLS and behind a unix socket, the two forms
// of address a later --listen will take, so that clients can be tried on them
// now. It returns the https URL, a PEM file that trusts its certificate, and the
// socket's path.
func addrProxies(t *testing.T, car *sidecar) (httpsURL, caFile, socketPath string) {
	t.Helper()
	target, err := url.Parse(car.base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // event streams pass at once
	// A fresh connection per request: a reused idle connection that the sidecar
	// closed makes the transport send an idempotent request (a DELETE) again, and
	// the second answer (404, already released) is the one the client gets.
	proxy.Transport = &http.Transport{DisableKeepAlives: true}
	tlsSrv := httptest.NewUnstartedServer(proxy)
	tlsSrv.StartTLS()
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "coord-addr") // short: a socket path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	socketPath = filepath.Join(dir, "sidecar.sock")
	ln, err := net.Listen("unix", socketPath)
	if err != nil {
		t.Fatal(err)
	}
	unixSrv := &http.Server{Handler: proxy}
	go func() { _ = unixSrv.Serve(ln) }()
	t.Cleanup(func() {
		tlsSrv.CloseClientConnections()
		tlsSrv.Close()
		_ = unixSrv.Close()
		_ = os.RemoveAll(dir)
	})
	return tlsSrv.URL, caFile, socketPath
}

// The lock wrapper reaches the sidecar by every form of address, from COORD_ADDR
// or --addr (which wins), and refuses a bad one before doing anything.
func TestWrapperAddressForms(t *testing.T) {
	t.Parallel() // mostly waiting: see TestMain
	bin := buildBinary(t)
	car := startSidecar(t, zktest.Shared(t).Servers(), zktest.Root(t))
	httpsURL, caFile, socketPath := addrProxies(t, car)
	for i, c := range []struct{ env, flag string }{
		{env: car.m.Addr()},                           // HOST:PORT
		{env: car.base},                               // http://HOST:PORT
		{env: car.base + "/"},                         // a trailing slash
		{env: httpsURL},                               // https://
		{env: "unix:" + socketPath},                   // a unix socket
		{env: "unix://" + socketPath},                 // the same as a URL
		{env: "ftp://nowhere:21", flag: car.m.Addr()}, // --addr wins over COORD_ADDR
	} {
		lock := fmt.Sprintf("addr-%d", i)
		args := []string{"lock", lock, "--", "sh", "-c", `echo "token $COORD_FENCING_TOKEN"`}
		if c.flag != "" {
			args = append([]string{"lock", "--addr", c.flag}, args[1:]...)
		}
		cmd := wrapper(bin, c.env, args...)
		cmd.Env = append(cmd.Env, "SSL_CERT_FILE="+caFile)
		out, err := cmd.CombinedOutput()
		if err != nil || !regexp.MustCompile(`^token [0-9]+\n$`).Match(out) {
			t.Fatalf("COORD_ADDR=%s --addr %q: %v, printed %q", c.env, c.flag, err, out)
		}
		if st := car.must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+lock); st.Body["holder"] != nil {
			t.Fatalf("COORD_ADDR=%s: afterwards %s, want the lock free", c.env, st.Raw)
		}
	}
	for _, bad := range []string{"ftp://nowhere:21", "localhost", "unix:", "http://user:pw@" + car.m.Addr()} {
		out, err := wrapper(bin, bad, "lock", "never", "--", "true").CombinedOutput()
		if code := exampleExitCode(err); code != exitUsage || !strings.Contains(string(out), addrForms) {
			t.Fatalf("COORD_ADDR=%s: exit %d, printed %q; want %d and the forms wanted", bad, code, out, exitUsage)
		}
	}
}
