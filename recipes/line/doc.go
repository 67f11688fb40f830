// Package recipes holds the recipes that stand in a line of sequential nodes:
// fair locks with fencing tokens, semaphores and read/write locks, and the
// line they share (line.go), which recipes/election waits in too (AwaitHead).
// It knows ZooKeeper through internal/zookeeper and leases through
// recipes/kit, and nothing of HTTP; elections, barriers, the queue, the
// throughput groups and the other recipes live in packages of their own on
// the same kit.
//
// Caveats every caller must respect:
//
//   - A call fails fast when its context has ended or the session is not
//     connected; waiting (for a lock, a permit) is always a select on watches
//     and the context, never a blocked call.
//   - A grant belongs to the session under which it was made (its lease's
//     Epoch). When that session is lost, the grant is lost and reported so; it
//     is never carried over to the next session.
//   - While the session is suspended, nothing is granted and operations answer
//     kit.ErrUnavailable.
//   - Fencing tokens are creation zxids (czxid), never sequence numbers: the
//     sequence counter is per parent and restarts when a container parent is
//     deleted and made again.
package recipes
