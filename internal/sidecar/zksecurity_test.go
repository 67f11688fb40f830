package sidecar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// writeTestFile writes data to dir/name and returns its path.
func writeTestFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The credentials come from the flag, the environment or a file (one source),
// and a malformed value is refused at start without being echoed; TLS files
// are checked at start too.
func TestZKSecurityFlags(t *testing.T) {
	dir := t.TempDir()
	authFile := writeTestFile(t, dir, "auth", []byte("digest:app:from-file\n"))
	empty := writeTestFile(t, dir, "empty", nil)
	ca := testutil.NewCA(t, "ca")
	caFile := writeTestFile(t, dir, "ca.pem", ca.PEM)
	cert, key := ca.Issue(t, "c", false)
	certFile, keyFile := writeTestFile(t, dir, "c.pem", cert), writeTestFile(t, dir, "k.pem", key)
	parse := func(env map[string]string, args ...string) (*Main, error) {
		m := NewMain()
		return m, m.ParseFlags(args, func(k string) string { return env[k] })
	}
	for _, c := range []struct {
		env  map[string]string
		args []string
		want string // the credentials read; "" none
	}{
		{nil, []string{"--zk-auth", "digest:app:argv"}, "app:argv"},
		{map[string]string{"COORD_ZK_AUTH": "digest:app:env"}, nil, "app:env"},
		{map[string]string{"COORD_ZK_AUTH_FILE": authFile}, nil, "app:from-file"},
		{nil, []string{"--zk-auth-file", authFile}, "app:from-file"},
		{nil, nil, ""},
	} {
		m, err := parse(c.env, c.args...)
		if err != nil {
			t.Fatalf("%v %v: %v", c.env, c.args, err)
		}
		cred, err := m.Config.zkCredentials()
		if err != nil || (cred == nil) != (c.want == "") || cred != nil && (cred.Scheme != "digest" || cred.Auth != c.want) {
			t.Fatalf("%v %v: credentials %+v, %v; want %q", c.env, c.args, cred, err, c.want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--zk-auth", "digest:app:x", "--zk-auth-file", authFile}, "give one of them"},
		{[]string{"--zk-auth", "digest-app-topsecret"}, "digest:user:password"},
		{[]string{"--zk-auth", "digest:topsecret"}, "digest:user:password"},
		{[]string{"--zk-auth-file", empty}, "empty"},
		{[]string{"--zk-auth-file", dir + "/missing"}, "--zk-auth-file"},
		{[]string{"--zk-tls-cert", certFile}, "go together"},
		{[]string{"--zk-tls-ca", certFile + ".nope"}, "--zk-tls-ca"},
		{[]string{"--zk-tls-ca", keyFile}, "no PEM certificate"},
		{[]string{"--zk-tls-ca", caFile, "--zk-tls-cert", certFile, "--zk-tls-key", caFile}, "--zk-tls-key"},
	} {
		_, err := parse(nil, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "topsecret") {
			t.Fatalf("%v: %v; want an error about %q that does not show the secret", c.args, err, c.want)
		}
	}
	if _, err := parse(nil, "--zk-tls-ca", caFile, "--zk-tls-cert", certFile, "--zk-tls-key", keyFile); err != nil {
		t.Fatal(err)
	}
}
