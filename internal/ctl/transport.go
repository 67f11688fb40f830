package ctl

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// How the lock and elect subcommands reach the sidecar: --addr in any form
// parseAddr takes (addr.go); over https:// the sidecar's certificate is
// verified against the system's roots or --cacert, with --cert/--key as a client
// certificate for a sidecar that asks for one; the token from --token,
// COORD_TOKEN or --token-file.

// transportOptions are the subcommands' flags for the connection.
type transportOptions struct {
	caFile, certFile, keyFile, tokenFile string
}

func (t *transportOptions) register(fs *flag.FlagSet, getenv func(string) string) {
	fs.StringVar(&t.caFile, "cacert", getenv("COORD_CACERT"), "PEM CA bundle that signed an https:// sidecar's certificate (COORD_CACERT)")
	fs.StringVar(&t.certFile, "cert", getenv("COORD_CERT"), "PEM client certificate, for a sidecar started with --tls-client-ca (COORD_CERT)")
	fs.StringVar(&t.keyFile, "key", getenv("COORD_KEY"), "PEM private key of --cert (COORD_KEY)")
	fs.StringVar(&t.tokenFile, "token-file", getenv("COORD_TOKEN_FILE"), "file holding the bearer token (COORD_TOKEN_FILE)")
}

// client builds the API client of the subcommand's flags; a bad address, token
// file or TLS file is a usage error (told on stderr, ExitUsage returned).
func (o *wrapOptions) client(prog string) (*apiClient, int) {
	addr, err := parseAddr(o.addr)
	if err != nil {
		fmt.Fprintf(o.stderr, "coord-sidecar %s: --addr / COORD_ADDR: %v\n", prog, err)
		return nil, ExitUsage
	}
	token := o.token
	if o.transport.tokenFile != "" {
		b, err := os.ReadFile(o.transport.tokenFile)
		if err != nil {
			fmt.Fprintf(o.stderr, "coord-sidecar %s: --token-file: %v\n", prog, err)
			return nil, ExitUsage
		}
		token = strings.TrimSpace(string(b))
	}
	c := newAPIClient(addr, token)
	if err := o.transport.secure(c, addr); err != nil {
		fmt.Fprintf(o.stderr, "coord-sidecar %s: %v\n", prog, err)
		return nil, ExitUsage
	}
	return c, 0
}

// Dial returns the base URL and the HTTP client the subcommands use for addr
// (any form parseAddr takes) when no TLS file, token or flag is given: over
// https:// the system's roots verify the sidecar.
func Dial(addr string) (string, *http.Client, error) {
	a, err := parseAddr(addr)
	if err != nil {
		return "", nil, err
	}
	c := newAPIClient(a, "")
	if err := (&transportOptions{}).secure(c, a); err != nil {
		return "", nil, err
	}
	return c.base, c.http, nil
}

// secure gives c the TLS settings of the flags when addr is https://; --cacert
// and --cert need one.
func (t *transportOptions) secure(c *apiClient, addr sidecarAddr) error {
	if !strings.HasPrefix(addr.base, "https://") {
		if t.caFile != "" || t.certFile != "" {
			return errors.New("--cacert and --cert need an https:// --addr")
		}
		return nil
	}
	cfg, err := t.tlsConfig()
	if err != nil {
		return err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	tr.TLSHandshakeTimeout = 10 * time.Second
	c.http.Transport = tr
	return nil
}

func (t *transportOptions) tlsConfig() (*tls.Config, error) {
	return ClientTLSConfig(TLSFiles{t.caFile, t.certFile, t.keyFile}, TLSFiles{"--cacert", "--cert", "--key"})
}

// TLSFiles are the PEM files of a TLS client (or the names of their flags): the
// CA bundle that verifies the server, and a client certificate and its key.
type TLSFiles struct{ CA, Cert, Key string }

// ClientTLSConfig builds a client's TLS configuration (TLS 1.2 at least) from
// files; without a CA the system's roots verify the server. Errors name the
// flags, as flags names them.
func ClientTLSConfig(files, flags TLSFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if files.CA != "" {
		pem, err := os.ReadFile(files.CA)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flags.CA, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", flags.CA, files.CA)
		}
		cfg.RootCAs = pool
	}
	if (files.Cert == "") != (files.Key == "") {
		return nil, fmt.Errorf("%s and %s go together", flags.Cert, flags.Key)
	}
	if files.Cert != "" {
		cert, err := tls.LoadX509KeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", flags.Cert, flags.Key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
