// Package ctl is coord-sidecar's subcommands that talk to a running sidecar:
// the wrappers (on the small hand-written client of client.go; their lease
// kept by lease.go, their command started by child.go, under the guard of
// guard_linux.go): lock, semaphore, rwlock and group join on one runner
// (held.go, held_kinds.go, cli_member.go), elect and its --observe (wrap.go,
// observe.go), service register (service.go); and the command-line client
// (cli.go and cli_*.go: kv, counter, queue, lease, barrier, service, status,
// on the generated api/client), all over one connection: --addr or
// COORD_ADDR in the forms of addr.go, TLS and the token in transport.go.
//
// They ride through a restart of the sidecar (kill -USR2, or kill -9 and a
// successor on the same --state-dir): a broken stream is opened again and a
// request the sidecar could not answer is made again (follow.go), and a
// wrapper keeps its lease, grant and command until the sidecar says the lease
// is gone or it could have ended unseen (lease.go).
//
// Each subcommand takes its arguments, environment and standard streams from
// its caller and returns the process's exit code (ExitUsage and the others);
// the binary's main dispatches to them and exits with that code.
package ctl
