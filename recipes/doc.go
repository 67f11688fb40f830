// Package recipes implements ZooKeeper coordination recipes for coord-sidecar:
// one Session, Leases that own grants, and fair Locks with fencing tokens. It knows
// ZooKeeper and nothing of HTTP.
//
// Caveats every caller must respect:
//
//   - go-zookeeper's calls take no context. A call here fails fast when its
//     context has ended or the session is not connected, and otherwise returns
//     within about one session timeout whatever ZooKeeper does (see epoch.call);
//     waiting (for a lock, a leader, a barrier) is always a select on watches and
//     the context, never a blocked call. A call cut off by a lost connection may
//     still have been applied, so writes are idempotent or recoverable (protected
//     creates).
//   - A grant belongs to the session under which it was made. When that session is
//     lost, the grant is lost and reported so; it is never carried over to the next
//     session, which the Session dials by itself.
//   - While the session is suspended (disconnected, maybe still alive on the
//     server), nothing is granted and operations answer ErrUnavailable.
//   - Fencing tokens are creation zxids (czxid), never sequence numbers: the
//     sequence counter is per parent and restarts when a container parent is
//     deleted and made again.
package recipes
