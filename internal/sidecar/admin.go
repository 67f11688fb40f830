package sidecar

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/coord-sidecar/coord-sidecar/api"
)

// The admin listener (--admin-listen): /healthz, /readyz and /metrics on a
// listener of their own, outside --max-conns, so that probes and scrapers see
// the sidecar whatever its clients do to the main listener. It has no Host
// allow-list and no token (what it serves is open on the main listener too);
// every other path answers 404.

// adminPaths are the paths the admin listener serves.
var adminPaths = map[string]bool{"/healthz": true, "/readyz": true, "/metrics": true}

// adminHandler serves GET and HEAD of adminPaths: /healthz and /readyz by
// main (the API's own answers, open to every Host), /metrics by metrics.
func adminHandler(main, metrics http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !adminPaths[r.URL.Path]:
			adminProblem(w, http.StatusNotFound, "not-found", "the admin listener serves /healthz, /readyz and /metrics only")
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			w.Header().Set("Allow", "GET, HEAD")
			adminProblem(w, http.StatusMethodNotAllowed, "method-not-allowed", "the admin listener answers GET and HEAD only")
		case r.URL.Path == "/metrics":
			metrics.ServeHTTP(w, r)
		default:
			main.ServeHTTP(w, r)
		}
	})
}

// adminProblem writes a problem document; it quotes nothing the client sent.
func adminProblem(w http.ResponseWriter, status int, name, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": api.ProblemBase + name, "title": http.StatusText(status),
		"status": status, "detail": detail})
}

// startAdmin serves the admin listener ln (nil: none) until stopHTTP.
func (m *Main) startAdmin(ln net.Listener, log *slog.Logger) {
	if ln == nil {
		return
	}
	c := m.Config
	m.adminListener = ln
	m.admin = &http.Server{
		Handler:           adminHandler(m.http.Handler, m.server.MetricsHandler()),
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       c.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ConnState:         m.adminConns.track,
	}
	m.adminServed = make(chan error, 1)
	go func() { m.adminServed <- m.admin.Serve(ln) }()
	log.Info("coord-sidecar admin listener serving /healthz, /readyz and /metrics", "adminListen", ln.Addr().String())
}

// closeAdmin stops the admin listener's accepting (a probe that comes then
// waits in the socket's backlog, which an upgrade's successor shares) and
// waits for its Serve to return.
func (m *Main) closeAdmin() {
	if m.admin == nil {
		return
	}
	_ = m.adminListener.Close()
	<-m.adminServed
}

// stopAdmin, after closeAdmin, waits as stopHTTP does for the admin
// connections to go quiet (net/http's Shutdown would drop a request read
// after it began), then answers the requests under way (within 5 s: its
// answers are short) and closes the rest.
func (m *Main) stopAdmin() {
	if m.admin == nil {
		return
	}
	m.adminConns.wait(handOverIdle, 2*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := m.admin.Shutdown(ctx); err != nil {
		_ = m.admin.Close()
	}
}

// AdminAddr is the address the admin listener listens on ("" without
// --admin-listen), after Run.
func (m *Main) AdminAddr() string {
	if m.adminListener == nil {
		return ""
	}
	return m.adminListener.Addr().String()
}
