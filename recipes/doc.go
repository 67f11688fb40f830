// Package recipes holds the recipes that stand in a line: fair locks with
// fencing tokens, leader elections (their line and the watch on the
// predecessor are shared, line.go), semaphores and read/write locks. It knows
// ZooKeeper through internal/zookeeper and leases through recipes/kit, and
// nothing of HTTP; barriers, the queue, the throughput groups and the other
// recipes live in packages of their own on the same kit.
//
// Caveats every caller must respect:
//
//   - A call fails fast when its context has ended or the session is not
//     connected; waiting (for a lock, a leader, a permit) is always a select
//     on watches and the context, never a blocked call.
//   - A grant belongs to the session under which it was made (its lease's
//     Epoch). When that session is lost, the grant is lost and reported so; it
//     is never carried over to the next session.
//   - While the session is suspended, nothing is granted and operations answer
//     kit.ErrUnavailable.
//   - Fencing tokens and terms are creation zxids (czxid), never sequence
//     numbers: the sequence counter is per parent and restarts when a container
//     parent is deleted and made again.
package recipes
