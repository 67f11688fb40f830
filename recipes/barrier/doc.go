// Package barrier keeps barriers and double barriers in ZooKeeper. A barrier
// is one node, <root>/barriers/<name>, raised while it exists (Curator's
// DistributedBarrier's layout); a double barrier is the enter/leave protocol
// of the ZooKeeper recipes page under <root>/double-barriers/<name> (see
// Barriers, and doublebarrier.go for its layout). It knows ZooKeeper through
// internal/zookeeper and leases through recipes/kit, and nothing of HTTP.
//
// Caveats every caller must respect:
//
//   - Waiting (for a barrier to be lowered, for participants to enter or
//     leave) is always a select on watches and the context, never a blocked
//     call; a wait sits out a suspended session within its bound. Other calls
//     fail fast with kit.ErrUnavailable while the session is not connected.
//   - A barrier raised for a lease, and a double-barrier participant, are
//     ephemeral nodes of the session under which they were made (the lease's
//     Epoch): when that session is lost they are gone, and never carried over
//     to the next session.
package barrier
