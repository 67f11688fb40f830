// Package lock keeps exclusive, fair locks in ZooKeeper, with fencing tokens
// (see Locks): a line of contender nodes per lock, waited in through
// recipes/line. It knows ZooKeeper through internal/zookeeper and leases
// through recipes/kit, and nothing of HTTP.
//
// Caveats every caller must respect:
//
//   - A call fails fast when its context has ended or the session is not
//     connected; waiting for the lock is always a select on watches and the
//     context, never a blocked call.
//   - A grant belongs to the session under which it was made (its lease's
//     Epoch). When that session is lost, the grant is lost and reported so; it
//     is never carried over to the next session.
//   - While the session is suspended, nothing is granted and operations answer
//     kit.ErrUnavailable.
//   - Fencing tokens are creation zxids (czxid), never sequence numbers.
package lock
