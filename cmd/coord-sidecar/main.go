// Command coord-sidecar holds one ZooKeeper session for an application and offers
// ZooKeeper's coordination recipes over HTTP/JSON and server-sent events.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	stop()
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar: shutdown:", err)
		os.Exit(1)
	}
}
