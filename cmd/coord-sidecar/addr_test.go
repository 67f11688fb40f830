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

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
)

// addrProxies serves car's API behind TLS and behind a unix socket, the two forms
// of address a later --listen will take, so that clients can be tried on them
// now. It returns the https URL, a PEM file that trusts its certificate, and the
// socket's path.
func addrProxies(t *testing.T, car *sidecartest.Sidecar) (httpsURL, caFile, socketPath string) {
	t.Helper()
	target, err := url.Parse(car.Base)
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
	bin := sidecartest.BuildBinary(t)
	car := sidecartest.Start(t, zktest.Shared(t).Servers(), zktest.Root(t), steadySession...)
	httpsURL, caFile, socketPath := addrProxies(t, car)
	for i, c := range []struct{ env, flag string }{
		{env: car.M.Addr()},                           // HOST:PORT
		{env: car.Base},                               // http://HOST:PORT
		{env: car.Base + "/"},                         // a trailing slash
		{env: httpsURL},                               // https://
		{env: "unix:" + socketPath},                   // a unix socket
		{env: "unix://" + socketPath},                 // the same as a URL
		{env: "ftp://nowhere:21", flag: car.M.Addr()}, // --addr wins over COORD_ADDR
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
		if st := car.Must(t, http.StatusOK, http.MethodGet, "/v1/locks/"+lock); st.Body["holder"] != nil {
			t.Fatalf("COORD_ADDR=%s: afterwards %s, want the lock free", c.env, st.Raw)
		}
	}
	for _, bad := range []string{"ftp://nowhere:21", "localhost", "unix:", "http://user:pw@" + car.M.Addr()} {
		out, err := wrapper(bin, bad, "lock", "never", "--", "true").CombinedOutput()
		if code := exampleExitCode(err); code != ctl.ExitUsage || !strings.Contains(string(out), ctl.AddrForms) {
			t.Fatalf("COORD_ADDR=%s: exit %d, printed %q; want %d and the forms wanted", bad, code, out, ctl.ExitUsage)
		}
	}
}
