// Command coord-sidecar holds one ZooKeeper session for an application and offers
// ZooKeeper's coordination recipes over HTTP/JSON and server-sent events.
//
// SIGHUP re-reads --tokens-file and --token-file; SIGTERM shuts down.
//
// Its subcommands talk to a running sidecar:
//
//	coord-sidecar lock NAME [--wait 30s] [--ttl 15s] -- COMMAND ARGS...
//	coord-sidecar elect NAME --id ID [--value V] [--requeue] -- COMMAND ARGS...
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "lock" || os.Args[1] == "elect") {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		run := runLock
		if os.Args[1] == "elect" {
			run = runElect
		}
		code := run(ctx, os.Args[2:], os.Getenv, os.Stderr)
		stop()
		os.Exit(code)
	}
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
		os.Exit(1)
	}
	for done := false; !done; {
		select {
		case <-hup:
			_ = m.Reload() // logged; the tokens in force stay on an error
		case <-ctx.Done():
			done = true
		}
	}
	signal.Stop(hup)
	stop()
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar: shutdown:", err)
		os.Exit(1)
	}
}
