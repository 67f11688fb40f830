package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// How the lock and elect subcommands reach the sidecar: --addr host:port or
// http://host:port, https://host:port (verified against the system's roots or
// --cacert, with --cert/--key as a client certificate for a sidecar that asks
// for one), or unix:/path/to.sock; the token from --token, COORD_TOKEN or
// --token-file.

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

// client builds the API client of the subcommand's flags.
func (o *wrapOptions) client() (*apiClient, error) {
	token := o.token
	if o.transport.tokenFile != "" {
		b, err := os.ReadFile(o.transport.tokenFile)
		if err != nil {
			return nil, fmt.Errorf("--token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	base, hc, err := o.transport.dial(o.addr)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		return newAPIClient(o.addr, token), nil
	}
	return &apiClient{base: base, token: token, http: hc}, nil
}

// dial returns the base URL and client for addr; a nil client means a plain
// http:// address, for newAPIClient.
func (t *transportOptions) dial(addr string) (string, *http.Client, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		path = strings.TrimPrefix(path, "//")
		if path == "" {
			return "", nil, errors.New("--addr unix:PATH: no path")
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.Proxy = nil
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		// The Host the sidecar sees is localhost, which its default
		// allow-list on a unix socket accepts.
		return "http://localhost", &http.Client{Transport: tr}, nil
	}
	if !strings.HasPrefix(addr, "https://") {
		if t.caFile != "" || t.certFile != "" {
			return "", nil, errors.New("--cacert and --cert need an https:// --addr")
		}
		return "", nil, nil
	}
	cfg, err := t.tlsConfig()
	if err != nil {
		return "", nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg
	tr.TLSHandshakeTimeout = 10 * time.Second
	return strings.TrimRight(addr, "/"), &http.Client{Transport: tr}, nil
}

func (t *transportOptions) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.caFile != "" {
		pem, err := os.ReadFile(t.caFile)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", t.caFile)
		}
		cfg.RootCAs = pool
	}
	if (t.certFile == "") != (t.keyFile == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if t.certFile != "" {
		cert, err := tls.LoadX509KeyPair(t.certFile, t.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
