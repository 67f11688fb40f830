package zktest

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// TestStartTLS: a server started by StartTLS answers a go-zookeeper client over
// TLS on its secure port, verified against the CA that signed its certificate;
// with ClientAuth "need", only a client presenting a certificate it trusts.
func TestStartTLS(t *testing.T) {
	ca, clientCA := testutil.NewCA(t, "zk CA"), testutil.NewCA(t, "client CA")
	cert, key := ca.Issue(t, "zookeeper", true)
	clientCert, clientKey := clientCA.Issue(t, "sidecar", false)
	c := StartTLS(t, TLS{CertPEM: cert, KeyPEM: key, CAPEM: clientCA.PEM, ClientAuth: "need"})
	if len(c.SecureServers()) != 1 || c.SecureServers()[0] == c.Server(0) {
		t.Fatalf("SecureServers = %v, Servers = %v", c.SecureServers(), c.Servers())
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	pair, err := tls.X509KeyPair(clientCert, clientKey)
	if err != nil {
		t.Fatal(err)
	}
	dial := func(certs []tls.Certificate) zk.Dialer {
		return func(network, addr string, timeout time.Duration) (net.Conn, error) {
			d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout},
				Config: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: certs}}
			return d.Dial(network, addr)
		}
	}
	conn, _, err := zk.Connect(c.SecureServers(), 4*time.Second, zk.WithDialer(dial([]tls.Certificate{pair})), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testutil.Eventually(t, 30*time.Second, "a session over TLS", func() bool { return conn.State() == zk.StateHasSession })
	if _, err := conn.Create("/tls", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}

	// Without a client certificate the server closes every connection.
	bare, _, err := zk.Connect(c.SecureServers(), 4*time.Second, zk.WithDialer(dial(nil)), zk.WithLogger(nopLogger{}))
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if bare.State() == zk.StateHasSession {
			t.Fatal("a client without a certificate got a session")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
