package api

import (
	_ "embed"
	"net/http"
)

// docsPage is the HTTP reference: Redoc's page of openapi.yaml, built by
// scripts/build-docs.sh (`make generate`) with Redoc's script inlined, so it
// loads nothing from anywhere and works offline. TestDocsPageIsFresh keeps it
// in step with openapi.yaml.
//
//go:embed docs/index.html
var docsPage []byte

// docsServed is docsPage, served compressed to a client that accepts gzip
// (about a quarter of its size on the wire: 0.7 of 2.7 MB).
var docsServed = newPage(docsPage)

// docsPolicy is the Content-Security-Policy of the reference: Redoc runs inline
// scripts and styles (its bundle and the spec are in the page), draws inline
// SVG and data: images and uses a data: icon font. Nothing else may load or be fetched, from the sidecar or
// from anywhere else, and no other site may frame the page.
const docsPolicy = "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// serveDocs answers GET /docs/ with the reference; /docs redirects there, as
// /ui does to /ui/. Like the status page it needs no token: it shows only the
// contract, which GET /openapi.yaml already serves to anyone, and calls nothing.
func serveDocs(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/docs" {
		http.Redirect(w, r, "/docs/", http.StatusMovedPermanently)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", docsPolicy)
	docsServed.serve(w, r)
}
