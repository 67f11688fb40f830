// Package sidecar is the coord-sidecar program as a value: Main parses the
// flags and the environment, connects the one ZooKeeper session, builds the
// HTTP surface (api/registry) on it and serves it; Reload, Upgrade and Close
// are SIGHUP, SIGUSR2 and SIGTERM. cmd/coord-sidecar only dispatches
// subcommands and signals to it, and tests run it in their process
// (internal/sidecartest).
package sidecar
