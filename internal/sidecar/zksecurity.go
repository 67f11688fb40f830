package sidecar

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/zookeeper/acl"
)

// The ZooKeeper side of the trust boundary: credentials (--zk-auth,
// --zk-auth-file), whether an ACL open to anyone keeps the sidecar unready
// (--zk-require-acl), and TLS to the ensemble (--zk-tls-ca, --zk-tls-cert,
// --zk-tls-key). They are read once at start.

// ZKSecurity is the ZooKeeper credentials and TLS files of the Config.
type ZKSecurity struct {
	// ZKAuth is "digest:user:password" (--zk-auth, COORD_ZK_AUTH); ZKAuthFile a
	// file holding it (--zk-auth-file, COORD_ZK_AUTH_FILE).
	ZKAuth, ZKAuthFile string
	// ZKTLSCA verifies the servers' certificates; ZKTLSCert and ZKTLSKey are the
	// sidecar's client certificate. Any of them turns TLS to ZooKeeper on.
	ZKTLSCA, ZKTLSCert, ZKTLSKey string
	// ZKRequireACL (--zk-require-acl, COORD_ZK_REQUIRE_ACL) keeps the sidecar
	// unready while the root or a recipe parent is open to anyone; it needs
	// credentials.
	ZKRequireACL bool
}

// zkCredentials reads the ZooKeeper credentials: nil when none are configured.
func (c ZKSecurity) zkCredentials() (*acl.Credentials, error) {
	if c.ZKAuth != "" && c.ZKAuthFile != "" {
		return nil, errors.New("--zk-auth and --zk-auth-file: give one of them")
	}
	s, what := c.ZKAuth, "--zk-auth"
	if c.ZKAuthFile != "" {
		b, err := os.ReadFile(c.ZKAuthFile)
		if err != nil {
			return nil, fmt.Errorf("--zk-auth-file: %w", err)
		}
		if s = strings.TrimSpace(string(b)); s == "" {
			return nil, fmt.Errorf("--zk-auth-file %s: empty", c.ZKAuthFile)
		}
		what = "--zk-auth-file " + c.ZKAuthFile
	}
	if s == "" {
		return nil, nil
	}
	cred, err := acl.ParseCredentials(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err) // the secret itself is never shown
	}
	return &cred, nil
}

// zkTLS builds the TLS configuration of the connections to ZooKeeper: nil when
// no --zk-tls-* flag is given. Without --zk-tls-ca the system's roots verify the
// servers.
func (c ZKSecurity) zkTLS() (*tls.Config, error) {
	if c.ZKTLSCA == "" && c.ZKTLSCert == "" && c.ZKTLSKey == "" {
		return nil, nil
	}
	return ctl.ClientTLSConfig(ctl.TLSFiles{CA: c.ZKTLSCA, Cert: c.ZKTLSCert, Key: c.ZKTLSKey},
		ctl.TLSFiles{CA: "--zk-tls-ca", Cert: "--zk-tls-cert", Key: "--zk-tls-key"})
}

// load checks and reads both.
func (c ZKSecurity) load() (*acl.Credentials, *tls.Config, error) {
	cred, err := c.zkCredentials()
	if err != nil {
		return nil, nil, err
	}
	if c.ZKRequireACL && cred == nil {
		return nil, nil, errors.New("--zk-require-acl needs --zk-auth or --zk-auth-file: without ZooKeeper credentials every node is open to anyone by design")
	}
	tlsCfg, err := c.zkTLS()
	return cred, tlsCfg, err
}
