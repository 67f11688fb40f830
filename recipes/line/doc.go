// Package line is the waiting line that locks, semaphores, read/write locks and
// elections share: a parent's sequential children ordered by their sequence
// suffix, a node waiting to head it (AwaitHead, AwaitUnblocked) while watching
// only the node that blocks it, the Handoffs through which this sidecar hands
// the head between its own waiters, the reading of a line for followers and
// inspections (WatchedChildren, NodeCache, Inspect), the release of a hold
// that names more than its name (Release), the metrics of a line's
// acquisitions (Metrics, AcquireResult), and the start of adopting a saved
// contender node after a restart (Saved). It knows ZooKeeper through
// internal/zookeeper and leases through recipes/kit, and nothing of HTTP.
//
// Caveats every caller must respect:
//
//   - Waiting is always a select on watches, the lease's end and the context,
//     never a blocked call; a suspended session is waited out within the wait.
//   - The head is reported only while connected under the node's own session
//     (the Epoch it was made in), never while suspended.
//   - Fencing tokens are creation zxids (czxid), never sequence numbers: the
//     sequence counter is per parent and restarts when a container parent is
//     deleted and made again.
package line
