// Command coord-sidecar holds one ZooKeeper session for an application and offers
// ZooKeeper's coordination recipes over HTTP/JSON and server-sent events.
//
// SIGHUP re-reads --tokens-file and --token-file; SIGTERM shuts down; SIGUSR2
// hands over to a successor running the binary now at its path (with
// --state-dir: see upgrade.go).
//
// Its subcommands talk to a running sidecar:
//
//	coord-sidecar lock NAME [--wait 30s] [--ttl 15s] -- COMMAND ARGS...
//	coord-sidecar elect NAME --id ID [--value V] [--requeue] -- COMMAND ARGS...
//	coord-sidecar semaphore NAME --max N -- COMMAND ARGS...
//	coord-sidecar rwlock NAME --read|--write -- COMMAND ARGS...
//	coord-sidecar service register SERVICE --id ID --address A [--port P] -- COMMAND ARGS...
//	coord-sidecar kv get KEY (and the command-line client's other verbs)
//
// The subcommands are package ctl (internal/ctl); main only
// dispatches to them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/coord-sidecar/coord-sidecar/internal/ctl"
	"github.com/coord-sidecar/coord-sidecar/internal/sidecar"
)

func main() {
	if len(os.Args) > 1 {
		runSubcommand(os.Args[1]) // exits when it is one
	}
	sidecar.StartPprof(os.Getenv)
	m := sidecar.NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
		fmt.Fprintln(os.Stderr, "(coord-sidecar --help lists the subcommands and flags)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	usr2 := make(chan os.Signal, 1)
	signal.Notify(usr2, syscall.SIGUSR2)
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
		os.Exit(1)
	}
	// Start-up's garbage goes back to the kernel once the sidecar serves.
	// Reading the embedded spec's rules and the packages' initialisation leave
	// megabytes of it. The heap's goal counts go-zookeeper's two 1.5 MiB
	// buffers, which are allocated but mostly never written, and is high
	// enough that the scavenger would return none of it: an idle sidecar
	// would keep it for its lifetime (docs/BENCHMARKS.md, issue 26). One forced
	// collection, once; the GC's pacing under load is unchanged.
	debug.FreeOSMemory()
	for done := false; !done; {
		select {
		case <-hup:
			_ = m.Reload() // logged; the tokens in force stay on an error
		case <-usr2:
			err := m.Upgrade()
			switch {
			case err == nil:
				os.Exit(0) // the successor serves, named in the pid file
			case errors.Is(err, sidecar.ErrSuccessorLost):
				fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
				os.Exit(1) // nobody serves: for the supervisor to restart
			}
			fmt.Fprintln(os.Stderr, "coord-sidecar: upgrade not done, still serving:", err)
		case err := <-m.Fatal():
			// The session and the state directory stay as they are, for
			// the successor a supervisor starts: no Close (it would close
			// the session and free every hold).
			m.Leave()
			fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
			os.Exit(1)
		case err := <-m.TakenOver():
			m.Abandon() // owner.go: another process holds the session now
			fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
			os.Exit(sidecar.ExitTakenOver)
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

// runSubcommand runs the subcommand named (the command-line client, the
// wrappers, the wrappers' guard, help) and exits with its code; it returns
// when name is none, for the sidecar to run.
func runSubcommand(name string) {
	if ctl.IsCLIGroup(name) {
		if self, err := os.Executable(); err == nil {
			ctl.GuardBinary = self // a wrapping verb (service register) runs the guard too
		}
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, ctl.EndSignals...)
		os.Exit(ctl.RunCLI(ctl.WatchSignals(sigs), os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	if run, ok := ctl.Wrappers[name]; ok { // lock, elect, semaphore, rwlock, ...
		if self, err := os.Executable(); err == nil {
			ctl.GuardBinary = self // this binary runs the guard (ctl.GuardArg, below)
		}
		sigs := make(chan os.Signal, 4)
		signal.Notify(sigs, ctl.EndSignals...)
		os.Exit(run(ctl.WatchSignals(sigs), os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	switch name {
	case ctl.GuardArg:
		os.Exit(ctl.RunGuard(os.Args[2:]))
	case "help":
		_ = sidecar.NewMain().ParseFlags([]string{"-h"}, func(string) string { return "" })
		os.Exit(0)
	}
}
