//go:build !linux

package ctl

import "syscall"

// childAttr is how a wrapper starts its command where the kernel cannot end
// it with the wrapper (no parent-death signal outside Linux): in a process
// group of its own (a Ctrl-C at the terminal reaches only the wrapper, which
// passes it on once, and a stop reaches the command's children too). A
// wrapper killed with SIGKILL leaves its command running there.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
