// Package ctl is coord-sidecar's subcommands that talk to a running sidecar:
// the lock and elect wrappers (wrap.go, on the small hand-written client of
// client.go for their lease streams) and the command-line client (cli.go: kv,
// counter, queue, lease, status, on the generated api/client), all over one
// connection: --addr or COORD_ADDR in the forms of addr.go, TLS and the token
// in transport.go.
//
// Each subcommand takes its arguments, environment and standard streams from
// its caller and returns the process's exit code (ExitUsage and the others);
// the binary's main dispatches to them and exits with that code.
package ctl
