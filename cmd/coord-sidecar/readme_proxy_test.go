//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/coord-sidecar/coord-sidecar/internal/sidecartest"
	"github.com/getkin/kin-openapi/openapi3"
)

// answerProxy stands in for Prism in the README's sessions that run their own
// sidecar (TestREADMESessionsWithTheirOwnSidecar): an HTTP proxy in the test's
// process in front of the address the session's sidecar listens on, which
// checks every JSON answer against the schema openapi.yaml declares for its
// operation and status (sidecartest.MatchesSchema, the contract tests' check: kin-openapi,
// with nullable read as OpenAPI 3.0.3 does). Requests are not checked: the
// sidecar itself refuses an undeclared parameter or field (400
// unknown-parameter), which the session would show. While nothing listens
// there (between a kill and the next start), it answers 502 without a body.
type answerProxy struct {
	addr string
	spec *openapi3.T

	mu    sync.Mutex
	found []string // violations, in order
	seen  int      // how many check has reported
}

// startAnswerProxy serves the proxy for upstream (host:port) on a free
// loopback port until t ends.
func startAnswerProxy(t *testing.T, spec *openapi3.T, upstream string) *answerProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &answerProxy{addr: ln.Addr().String(), spec: spec}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: upstream})
	rp.ModifyResponse = p.checkAnswer
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, _ error) { w.WriteHeader(http.StatusBadGateway) }
	srv := &http.Server{Handler: rp}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close(); <-done })
	return p
}

// checkAnswer records resp as a violation unless openapi.yaml declares its
// status for the operation and, for a JSON body, the body matches the schema.
func (p *answerProxy) checkAnswer(resp *http.Response) error {
	req := resp.Request
	declared := sidecartest.AnswerOf(p.spec, req.Method, req.URL.Path, resp.StatusCode)
	if declared == nil {
		p.violation("%s %s: %d, which openapi.yaml does not declare", req.Method, req.URL.Path, resp.StatusCode)
		return nil
	}
	ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if !strings.HasSuffix(ct, "json") {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return err
	}
	mt := declared.Content[ct]
	var v any
	switch {
	case mt == nil || mt.Schema == nil:
		p.violation("%s %s: %d with a %s body, which openapi.yaml does not declare", req.Method, req.URL.Path, resp.StatusCode, ct)
	case json.Unmarshal(body, &v) != nil:
		p.violation("%s %s: %d, not JSON: %s", req.Method, req.URL.Path, resp.StatusCode, body)
	default:
		if err := sidecartest.MatchesSchema(mt.Schema.Value, v); err != nil {
			p.violation("%s %s: %d %s does not match its schema: %v", req.Method, req.URL.Path, resp.StatusCode, body, err)
		}
	}
	return nil
}

func (p *answerProxy) violation(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.found = append(p.found, fmt.Sprintf(format, args...))
}

func (p *answerProxy) address() string { return p.addr }

// check fails the test on any violation found since the last check.
func (p *answerProxy) check(t *testing.T, st step) {
	t.Helper()
	p.mu.Lock()
	fresh := p.found[p.seen:]
	p.seen = len(p.found)
	p.mu.Unlock()
	if len(fresh) > 0 {
		t.Errorf("README.md:%d: %s: answers that break openapi.yaml:\n%s", st.line, st.command, strings.Join(fresh, "\n"))
	}
}

// violations are every violation found in the whole run.
func (p *answerProxy) violations() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.found, "\n")
}
