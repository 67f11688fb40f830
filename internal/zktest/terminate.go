package zktest

import "syscall"

// Terminate sends SIGTERM to node i (the JVM's shutdown: the server closes its
// clients' connections) and returns once the process has exited. Stopping a
// node that is not running does nothing.
func (c *Cluster) Terminate(i int) {
	c.tb.Helper()
	if c.c.nodes == nil {
		c.tb.Skip("zktest: Terminate needs servers started by zktest, not ZK_SERVERS")
	}
	nd := c.c.nodes[i]
	nd.mu.Lock()
	cmd, exited := nd.cmd, nd.exited
	nd.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-exited
}
