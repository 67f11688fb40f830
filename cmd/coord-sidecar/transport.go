package main

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
// file or TLS file is a usage error (told on stderr, exitUsage returned).
func (o *wrapOptions) client(prog string) (*apiClient, int) {
	addr, err := parseAddr(o.addr)
	if err != nil {
		fmt.Fprintf(o.stderr, "coord-sidecar %s: --addr / COORD_ADDR: %v\n", prog, err)
		return nil, exitUsage
	}
	token := o.token
	if o.transport.tokenFile != "" {
		b, err := os.ReadFile(o.transport.tokenFile)
		if err != nil {
			fmt.Fprintf(o.stderr, "coord-sidecar %s: --token-file: %v\n", prog, err)
			return nil, exitUsage
		}
		token = strings.TrimSpace(string(b))
	}
	c := newAPIClient(addr, token)
	if err := o.transport.secure(c, addr); err != nil {
		fmt.Fprintf(o.stderr, "coord-sidecar %s: %v\n", prog, err)
		return nil, exitUsage
	}
	return c, 0
}

// dial returns the base URL and the HTTP client the subcommands use for addr.
func (t *transportOptions) dial(addr string) (string, *http.Client, error) {
	a, err := parseAddr(addr)
	if err != nil {
		return "", nil, err
	}
	c := newAPIClient(a, "")
	if err := t.secure(c, a); err != nil {
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
	return clientTLSConfig(tlsFiles{t.caFile, t.certFile, t.keyFile}, tlsFiles{"--cacert", "--cert", "--key"})
}

// tlsFiles are the PEM files of a TLS client (or the names of their flags): the
// CA bundle that verifies the server, and a client certificate and its key.
type tlsFiles struct{ ca, cert, key string }

// clientTLSConfig builds a client's TLS configuration (TLS 1.2 at least) from
// files; without a CA the system's roots verify the server. Errors name the
// flags, as flags names them.
func clientTLSConfig(files, flags tlsFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if files.ca != "" {
		pem, err := os.ReadFile(files.ca)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", flags.ca, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s %s: no PEM certificate in it", flags.ca, files.ca)
		}
		cfg.RootCAs = pool
	}
	if (files.cert == "") != (files.key == "") {
		return nil, fmt.Errorf("%s and %s go together", flags.cert, flags.key)
	}
	if files.cert != "" {
		cert, err := tls.LoadX509KeyPair(files.cert, files.key)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %w", flags.cert, flags.key, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
