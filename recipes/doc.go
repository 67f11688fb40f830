// Package recipes implements ZooKeeper coordination recipes for coord-sidecar:
// one Session, Leases that own grants, and fair Locks with fencing tokens. It knows
// ZooKeeper and nothing of HTTP.
//
// Caveats every caller must respect:
//
//   - go-zookeeper's calls take no context. Every call here runs with a deadline of
//     its own (the caller's context, else Config.OpTimeout); a call abandoned at its
//     deadline still completes in the background, so writes are made idempotent or
//     recoverable (protected creates).
//   - A grant belongs to the session under which it was made. When that session is
//     lost, the grant is lost and reported so; it is never carried over to the next
//     session, which the Session dials by itself.
//   - While the session is suspended (disconnected, maybe still alive on the
//     server), nothing is granted and operations answer ErrUnavailable.
//   - Fencing tokens are creation zxids (czxid), never sequence numbers: the
//     sequence counter is per parent and restarts when a container parent is
//     deleted and made again.
package recipes
