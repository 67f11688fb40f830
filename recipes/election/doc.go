// Package election keeps leader elections in ZooKeeper, in Curator
// LeaderLatch's layout (see Elections): a line of candidate nodes under
// <root>/elections/<name>, waited in through recipes/line (AwaitHead), the line
// locks share. It knows ZooKeeper through internal/zookeeper and leases
// through recipes/kit, and nothing of HTTP.
//
// Caveats every caller must respect:
//
//   - A call fails fast when its context has ended or the session is not
//     connected; waiting to lead is always a select on watches and the
//     context, never a blocked call.
//   - A candidacy belongs to the session under which it was made (its lease's
//     Epoch). When that session is lost, the candidacy and any leadership are
//     lost and reported so; they are never carried over to the next session.
//   - While the session is suspended, no candidate is reported leading (a
//     followed state has Suspended set) and campaigns answer
//     kit.ErrUnavailable.
//   - Terms are creation zxids (czxid), never sequence numbers: the sequence
//     counter is per parent and restarts when a container parent is deleted
//     and made again.
package election
