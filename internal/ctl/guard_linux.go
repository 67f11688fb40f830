package ctl

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// GuardArg is the hidden subcommand of the guard: `coord-sidecar __guard
// WRAPPER_PID -- COMMAND ARGS...` (the wrapper starts it; nobody else should).
const GuardArg = "__guard"

// guarded is how a wrapper runs its command on Linux: through the guard, this
// same binary, which the wrapper starts as the leader of a process group of
// its own (childAttr) and which starts the command in that group. The kernel
// sends the guard SIGTERM when the wrapper dies, even by SIGKILL (Pdeathsig);
// the guard then kills the whole group, the command and every process it
// started there. So no part of a command outlives its wrapper and the lock or
// leadership it held.
func guarded(command []string) *exec.Cmd {
	if GuardBinary == "" {
		return exec.Command(command[0], command[1:]...)
	}
	return exec.Command(GuardBinary, append([]string{GuardArg, strconv.Itoa(os.Getpid()), "--"}, command...)...)
}

// GuardBinary is the binary that runs the guard (main sets it to its own
// executable, which dispatches GuardArg to RunGuard); empty, a wrapper runs
// its command itself, ended with the wrapper by the kernel's parent-death
// signal alone (the command only, not the processes it started).
var GuardBinary string

// childAttr is how a wrapper starts the guard: the leader of a process group
// of its own (a Ctrl-C at the terminal reaches only the wrapper, which passes
// it on to the group once), sent SIGTERM by the kernel when the thread that
// started it ends (startChild keeps that thread for the command's life).
// Without a guard the command itself gets SIGKILL.
func childAttr() *syscall.SysProcAttr {
	if GuardBinary == "" {
		return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	}
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// RunGuard is the guard (see guarded): it runs the command in its own process
// group and exits as the command did (killed by the same signal, or with the
// same code). The end signals the wrapper passes to the group reach the
// command by themselves, so the guard only notes them; one that comes when
// the wrapper is gone (the parent-death signal) kills the group.
func RunGuard(args []string) int {
	if len(args) < 3 || args[1] != "--" {
		fmt.Fprintln(os.Stderr, "coord-sidecar "+GuardArg+": for the lock and elect wrappers only")
		return 64
	}
	wrapper, err := strconv.Atoi(args[0])
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	if err != nil || os.Getppid() != wrapper { // the wrapper died before the signal was armed
		return 128 + int(syscall.SIGKILL)
	}
	cmd := exec.Command(args[2], args[3:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "coord-sidecar:", err)
		return 127
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	for {
		select {
		case <-sigs:
			if os.Getppid() != wrapper {
				_ = syscall.Kill(0, syscall.SIGKILL) // the group, this process too
			}
		case <-done:
			return exitAs(cmd.ProcessState)
		}
	}
}

// exitAs ends the guard as st ended: by the same signal, or with its code.
func exitAs(st *os.ProcessState) int {
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		signal.Reset(ws.Signal())
		_ = syscall.Kill(os.Getpid(), ws.Signal())
		return 128 + int(ws.Signal()) // a signal it cannot die of
	}
	return st.ExitCode()
}

// awaitGroupGone waits, for at most limit, until no process of the process
// group pgid runs any more (zombies aside): after the wrapper killed the
// group, the guard can be waited for before the command has died.
func awaitGroupGone(pgid int, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for groupRuns(pgid) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
}

// groupRuns tells whether a process of group pgid runs (is not a zombie).
func groupRuns(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
			continue
		}
		if g, err := strconv.Atoi(f[2]); err == nil && g == pgid {
			return true
		}
	}
	return false
}
