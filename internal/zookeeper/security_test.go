package zookeeper_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/faultproxy"
	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
	"github.com/coord-sidecar/coord-sidecar/internal/zktest"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/acl"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/zookeepertest"
)

var appCreds = &acl.Credentials{Scheme: "digest", Auth: "app:s3cret"}

// appConn is a plain go-zookeeper client authenticated as app:s3cret.
func appConn(t *testing.T, servers []string) *zk.Conn {
	t.Helper()
	c := zktest.Connect(t, servers, 4*time.Second)
	if err := c.AddAuth(appCreds.Scheme, []byte(appCreds.Auth)); err != nil {
		t.Fatal(err)
	}
	return c
}

// checkCreatorOnly fails t unless every path carries the creator-only ACL of
// the digest identity app:s3cret (read through app, a client with those
// credentials), and a client without them (anon) can neither read, list, read
// the ACL of, write, delete, create under nor re-ACL any of them.
func checkCreatorOnly(t *testing.T, app, anon *zk.Conn, paths ...string) {
	t.Helper()
	want := zk.DigestACL(zk.PermAll, "app", "s3cret")
	for _, p := range paths {
		acl, _, err := app.GetACL(p)
		if err != nil || len(acl) != 1 || acl[0] != want[0] {
			t.Fatalf("ACL of %s = %v, %v; want %v", p, acl, err, want)
		}
		if _, _, err := anon.GetACL(p); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("anonymous GetACL %s: %v, want ErrNoAuth", p, err)
		}
		if _, _, err := anon.Get(p); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("anonymous Get %s: %v, want ErrNoAuth", p, err)
		}
		if _, _, err := anon.Children(p); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("anonymous Children %s: %v, want ErrNoAuth", p, err)
		}
		if _, err := anon.Set(p, []byte("evil"), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("anonymous Set %s: %v, want ErrNoAuth", p, err)
		}
		if _, err := anon.SetACL(p, zk.WorldACL(zk.PermAll), -1); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("anonymous SetACL %s: %v, want ErrNoAuth", p, err)
		}
		if _, err := anon.Create(p+"/evil", nil, 0, zk.WorldACL(zk.PermAll)); !errors.Is(err, zk.ErrNoAuth) {
			t.Errorf("anonymous Create under %s: %v, want ErrNoAuth", p, err)
		}
	}
	leaf := paths[len(paths)-1]
	if err := anon.Delete(leaf, -1); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("anonymous Delete %s: %v, want ErrNoAuth", leaf, err)
	}
}

// With credentials, every node the session creates (the root and parents made
// on demand included) carries a creator-only ACL: another session with the same
// credentials may do everything, one without them or with others nothing.
func TestCredentialsGiveCreatorOnlyACL(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := zookeepertest.Start(t, zookeeper.Config{Servers: zkc.Servers(), Root: root, Auth: appCreds})
	ep, err := s.Current()
	if err != nil {
		t.Fatal(err)
	}
	parent := root + "/kv/a"
	if err := ep.EnsurePersistent(ctx, parent); err != nil {
		t.Fatal(err)
	}
	node := parent + "/held"
	if _, err := ep.Create(ctx, node, []byte("lease L-secret"), zookeeper.Ephemeral); err != nil {
		t.Fatal(err)
	}
	anon := zktest.Connect(t, zkc.Servers(), 4*time.Second)
	checkCreatorOnly(t, appConn(t, zkc.Servers()), anon, root, root+"/kv", parent, node)

	stranger := zktest.Connect(t, zkc.Servers(), 4*time.Second)
	if err := stranger.AddAuth("digest", []byte("app:wrong")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := stranger.Get(node); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("Get with other credentials: %v, want ErrNoAuth", err)
	}

	peer := zookeepertest.Start(t, zookeeper.Config{Servers: zkc.Servers(), Root: root, Auth: appCreds})
	pep, err := peer.Current()
	if err != nil {
		t.Fatal(err)
	}
	if data, _, err := pep.Get(ctx, node); err != nil || string(data) != "lease L-secret" {
		t.Fatalf("Get with the same credentials = %q, %v", data, err)
	}
	if _, err := pep.Set(ctx, node, []byte("x"), -1); err != nil {
		t.Fatal(err)
	}
	if err := pep.Delete(ctx, node, -1); err != nil {
		t.Fatal(err)
	}
}

// The credentials hold across a reconnect of the same session (go-zookeeper
// re-sends them) and across a new session after the old one is lost (the
// Session adds them before it counts as connected): nodes made afterwards still
// carry the creator-only ACL, so the create with it never fails.
func TestCredentialsAfterReconnectAndLoss(t *testing.T) {
	zkc := zktest.Shared(t)
	root := zktest.Root(t)
	proxy := faultproxy.Start(t, zkc.Server(0))
	s := zookeepertest.Start(t, zookeeper.Config{Servers: []string{proxy.Addr()}, Root: root, Auth: appCreds, Timeout: 2 * time.Second})
	anon, app := zktest.Connect(t, zkc.Servers(), 4*time.Second), appConn(t, zkc.Servers())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	create := func(name string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, "session connected", func() bool { return s.State() == zookeeper.StateConnected })
		ep, err := s.Current()
		if err != nil {
			t.Fatal(err)
		}
		if err := ep.EnsurePersistent(ctx, root+"/"+name); err != nil {
			t.Fatal(err)
		}
		if _, err := ep.Create(ctx, root+"/"+name+"/e", nil, zookeeper.Ephemeral); err != nil {
			t.Fatal(err)
		}
		checkCreatorOnly(t, app, anon, root+"/"+name, root+"/"+name+"/e")
	}
	create("first")
	first, _ := s.Current()

	proxy.Cut() // shorter than the session timeout: the same session comes back
	testutil.Eventually(t, 10*time.Second, "session suspended", func() bool { return s.State() != zookeeper.StateConnected })
	proxy.Restore()
	create("reconnected")
	if cur, _ := s.Current(); cur != first {
		t.Logf("the session was replaced rather than resumed (a slow machine); the credentials held either way")
	}

	// A session is declared lost only once ZooKeeper says it expired.
	lost := zookeepertest.Expire(t, s, zkc.Servers(), proxy.Cut, proxy.Restore)
	create("after-loss")
	if cur, _ := s.Current(); cur == lost {
		t.Fatal("the same epoch after a loss")
	}
}

// Over TLS the session connects only to a server whose certificate the
// configured CA signed, for the host it dialed (an IP address or a name).
func TestTLSVerifiesTheServer(t *testing.T) {
	ca, other := testutil.NewCA(t, "zk CA"), testutil.NewCA(t, "other CA")
	cert, key := ca.Issue(t, "zookeeper", true)
	zkc := zktest.StartTLS(t, zktest.TLS{CertPEM: cert, KeyPEM: key, CAPEM: ca.PEM})
	addr := zkc.SecureServers()[0]
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, server := range []string{addr, "localhost:" + addr[len("127.0.0.1:"):]} {
		s := zookeepertest.Start(t, zookeeper.Config{Servers: []string{server}, Root: "/tls", TLS: clientTLS(ca.PEM)})
		ep, err := s.Current()
		if err != nil {
			t.Fatal(err)
		}
		if err := ep.EnsurePersistent(ctx, "/tls/ok"); err != nil {
			t.Fatal(err)
		}
	}

	s, err := zookeeper.NewSession(zookeeper.Config{Servers: []string{addr}, Root: "/tls", TLS: clientTLS(other.PEM), Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	changed := s.Changed()
	select {
	case <-changed:
		t.Fatalf("a session verified by the wrong CA changed state: %v", s.State())
	case <-time.After(5 * time.Second):
	}
	if _, err := s.Current(); !errors.Is(err, zookeeper.ErrUnavailable) {
		t.Fatalf("Current with the wrong CA: %v, want ErrUnavailable", err)
	}
}

func clientTLS(caPEM []byte) *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}
