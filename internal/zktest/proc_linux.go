package zktest

import "syscall"

// sysProcAttr puts the server in its own process group (a Ctrl-C meant for
// the test does not reach it) and has the kernel kill it if the test
// process dies without running Main or cleanups.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
