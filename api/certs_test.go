package api_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"testing"
	"time"

	"github.com/coord-sidecar/coord-sidecar/internal/testutil"
)

// testCA is a certificate authority made for one test (testutil.CA).
type testCA struct {
	*testutil.CA
	pem []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	ca := testutil.NewCA(t, name)
	return &testCA{CA: ca, pem: ca.PEM}
}

// issue makes a certificate for cn: a server's (for 127.0.0.1, ::1 and
// localhost) or a client's, and returns its PEM certificate and key.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.Issue(t, cn, server)
}

// tlsClient is an HTTP client that trusts roots and presents the client
// certificate (when certPEM is given).
func tlsClient(t *testing.T, roots []byte, certPEM, keyPEM []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(roots)
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if certPEM != nil {
		c, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	tr := &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}
