package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/coord-sidecar/coord-sidecar/sse"
)

// apiClient is the small HTTP client the lock and elect subcommands use to talk
// to a running sidecar.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPIClient(addr sidecarAddr, token string) *apiClient {
	c := &apiClient{base: addr.base, token: token, http: &http.Client{}}
	if addr.socket != "" {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.Proxy = nil
		t.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr.socket)
		}
		c.http.Transport = t
	}
	return c
}

// apiError is a non-2xx answer: its status and problem document.
type apiError struct {
	Status  int
	Problem map[string]any
}

func (e *apiError) Error() string {
	if d, ok := e.Problem["detail"].(string); ok {
		return fmt.Sprintf("%d: %s", e.Status, d)
	}
	return fmt.Sprintf("status %d", e.Status)
}

func (e *apiError) problem() string {
	t, _ := e.Problem["type"].(string)
	return t[strings.LastIndex(t, "/")+1:]
}

func (c *apiClient) request(ctx context.Context, method, path string, q url.Values, body any) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = strings.NewReader(string(b))
	}
	u := c.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.authorize(req)
	return req, nil
}

// authorize gives req the client's bearer token, when it has one.
func (c *apiClient) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// call sends a request and decodes a JSON answer into out (when not nil).
func (c *apiClient) call(ctx context.Context, method, path string, q url.Values, body, out any) error {
	req, err := c.request(ctx, method, path, q, body)
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		e := &apiError{Status: resp.StatusCode}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber() // 64-bit extensions (a holder's fencing token) exact
		_ = d.Decode(&e.Problem)
		return e
	}
	if out != nil && len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// stream opens an event stream (with Last-Event-ID: lastID, unless empty);
// events arrive on the returned channel, which closes when the stream ends (ctx
// ended, the sidecar went away, or it ended it). A reconnecting stream is
// follow's (follow.go).
func (c *apiClient) stream(ctx context.Context, path, lastID string) (<-chan sse.Event, error) {
	req, err := c.request(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		e := &apiError{Status: resp.StatusCode}
		_ = json.NewDecoder(resp.Body).Decode(&e.Problem)
		return nil, e
	}
	ch := make(chan sse.Event, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}
