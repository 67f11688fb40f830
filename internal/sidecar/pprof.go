package sidecar

import (
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// StartPprof serves Go's profiles (net/http/pprof, /debug/pprof/...) on the
// address in COORD_PPROF, e.g. 127.0.0.1:6060, on a listener of its own, apart
// from the API and its tokens: it is for measuring (docs/BENCHMARKS.md), off
// unless set, and should stay on loopback.
func StartPprof(getenv func(string) string) {
	addr := getenv("COORD_PPROF")
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar: COORD_PPROF:", err)
		os.Exit(2)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }() //nolint:gosec // loopback, for measuring only
}
