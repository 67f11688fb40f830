package ctl

import "syscall"

// childAttr is how a wrapper starts its command on Linux: in a process group
// of its own (a Ctrl-C at the terminal reaches only the wrapper, which passes
// it on once, and a stop reaches the command's children too), and killed
// (SIGKILL) by the kernel when the wrapper dies, even by SIGKILL, so that no
// command runs on after the wrapper that holds its lock or leadership.
//
// The kernel sends that signal when the thread that started the command ends
// (startChild keeps it for the command's life), and only to the command
// itself: a process the command started (in its process group) outlives a
// wrapper killed with SIGKILL unless the command ends it. A command that
// should end whole should exec its last process (sh -c 'exec ...') or end
// its children when it dies.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
