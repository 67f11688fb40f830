package ctl

import (
	"os/exec"
	"runtime"
)

// startChild starts cmd (with childAttr's attributes) and waits for it on a
// goroutine that keeps, locked, the OS thread that started it, for as long as
// the command runs: the parent-death signal of childAttr is sent when that
// thread ends, not the process, and a Go thread may end with the goroutine
// locked to it. The returned channel closes once the command has exited and
// been waited for (cmd.ProcessState then says how); pid is called with the
// command's pid once started and with 0 once it has exited (before the
// channel closes). The goroutine is the command's: it ends with it.
func startChild(cmd *exec.Cmd, pid func(int)) (<-chan struct{}, error) {
	cmd.SysProcAttr = childAttr()
	exited := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		pid(cmd.Process.Pid)
		started <- nil
		_ = cmd.Wait()
		pid(0)
		close(exited)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return exited, nil
}
