package zktest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// nettyJars are the jars of Debian's libnetty-java (a dependency of the
// zookeeper package) that the Netty server needs besides those zookeeper.jar's
// manifest lists.
var nettyJars = []string{
	"/usr/share/java/netty-codec.jar",
	"/usr/share/java/netty-resolver.jar",
	"/usr/share/java/netty-transport-native-unix-common.jar",
}

// TLS configures the secure client port of a server started by StartTLS.
type TLS struct {
	// CertPEM and KeyPEM are the server's certificate (it must name 127.0.0.1)
	// and its PKCS#8 private key ("PRIVATE KEY"), as testutil.CA.Issue makes them.
	CertPEM, KeyPEM []byte
	// CAPEM holds the CA certificates the server trusts for client certificates.
	CAPEM []byte
	// ClientAuth is "none" (the default: no client certificate asked for),
	// "want" or "need".
	ClientAuth string
}

// StartTLS starts a standalone server of the test's own that serves TLS on a
// secure client port (SecureServers) besides its plain one (Servers), with
// Netty and PEM key and trust stores. It returns once both ports serve; the
// server is killed and its directory removed in tb.Cleanup.
func StartTLS(tb testing.TB, opt TLS) *Cluster {
	tb.Helper()
	for _, jar := range nettyJars {
		if _, err := os.Stat(jar); err != nil {
			tb.Fatalf("zktest: %s is missing (Debian's libnetty-java); run scripts/zookeeper.sh install", jar)
		}
	}
	return start(tb, 1, &opt)
}

// configure writes nd's key and trust stores and returns the zoo.cfg lines of
// its secure client port.
func (opt *TLS) configure(nd *node) (string, error) {
	keyStore := filepath.Join(nd.dir, "keystore.pem")
	trustStore := filepath.Join(nd.dir, "truststore.pem")
	if err := os.WriteFile(keyStore, append(append([]byte{}, opt.KeyPEM...), opt.CertPEM...), 0o600); err != nil {
		return "", err
	}
	if err := os.WriteFile(trustStore, opt.CAPEM, 0o644); err != nil {
		return "", err
	}
	clientAuth := opt.ClientAuth
	if clientAuth == "" {
		clientAuth = "none"
	}
	// The server checks client certificates against its trust store; it does
	// not check their names against the client's address.
	return fmt.Sprintf("secureClientPort=%d\nserverCnxnFactory=%s\n"+
		"ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n"+
		"ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n"+
		"ssl.clientAuth=%s\nssl.hostnameVerification=false\n",
		nd.securePort, nettyFactory, keyStore, trustStore, clientAuth), nil
}

// listening tells whether something accepts TCP connections on addr.
func listening(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
