package api

import (
	_ "embed"
	"net/http"
)

// uiPage is the status page: one HTML file with its script and styles inline, no
// external assets, live over GET /v1/events.
//
//go:embed ui/index.html
var uiPage []byte

// uiServed is uiPage, served compressed to a client that accepts gzip.
var uiServed = newPage(uiPage)

func serveUI(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
	uiServed.serve(w, r)
}

// serveFavicon answers the icon request a browser makes with every page (the
// status page has none) with nothing, rather than a 404 in its console.
func serveFavicon(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "max-age=86400")
	w.WriteHeader(http.StatusNoContent)
}
