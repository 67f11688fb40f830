// Package kit is what every coord-sidecar recipe is built on, above the
// ZooKeeper layer (internal/zookeeper):
//
//   - Leases and the one hold protocol (Acquire, Release, Take, Lookup): a lease
//     owns what recipes grant; reserve, pin, grant and unwind are written once,
//     with typed values.
//   - The one follower (Followers, Follower, Watches): a piece of ZooKeeper state
//     kept current for every subscriber of one name on this sidecar, with one
//     set of watches armed per session generation, re-read after every
//     reconnect, started by the first subscriber and stopped by the last; with
//     the sources every reader above the kit may compose (DirSource: a
//     directory's names; TreeSource: a name's subtree, read by a function of
//     the caller's), so that no package above the kit arms a watch itself.
//   - Names, sentinel errors and bounded waits shared by every recipe.
//
// A recipe is then its ZooKeeper layout and its decisions.
//
// # The hold protocol, the follower and their goroutines
//
//   - Hold protocol (`recipes/kit/hold.go`). A recipe's grant is a type that
//     implements `kit.Holding` (its `Release` lets it go in ZooKeeper). The
//     recipe calls `kit.Acquire(ctx, lease, kit.Hold{Kind, Name}, step)`;
//     `step` makes the nodes under the lease's `Epoch` and returns the typed
//     holding. `kit.Release`, `kit.Take` and `kit.Lookup` are the other three
//     moves. A lease releases every holding when it ends (revoked, expired,
//     session lost).
//   - Follower (`recipes/kit/follow.go`). A recipe that streams its state
//     implements `kit.Source[S]`: `Read` (arming watches through
//     `kit.Watches`: `Need` tells whether a part's watch is armed under the
//     current session generation, `Armed` records one), `Reset` (a new
//     session: caches are stale), `Uncertain` (the state to show while not
//     connected, given a `kit.Uncertainty`: the last state marked suspended
//     during the first part of a suspension, nobody vouched for once the
//     session could have expired) and `Same`. After a reconnect of the same
//     session every armed part is marked stale (`Watches.stale`), so the next
//     `Read` reads it again and arms its watch anew (the old watch's forwarder
//     ends): nothing seen before the gap is trusted, and a suspension that
//     changed nothing publishes two states, its start and its end.
//     `kit.Followers` is the one registry per kind: however many streams and
//     long-polls follow a name, one follower with one set of watches runs for
//     it, started by the first `Follow` and stopped by the last `Close`. A
//     reader with no source of its own composes the kit's: `kit.DirSource` (a
//     directory's names) and `kit.TreeSource` (a name's subtree, read by the
//     reader's function); it never arms a watch itself. Every follower's
//     `Read` runs in one of the session's background slots
//     (`zookeeper.Session.Background`), so the whole picture's first read of
//     10,000 things goes 64 reads at a time. The API's topics and long-polls
//     subscribe to it directly.
//   - ZooKeeper layer (`internal/zookeeper`). Every call takes a context and
//     returns by its deadline; every failure is one of `ErrUnavailable`,
//     `ErrSessionLost`, `ErrClosed` or ZooKeeper's own answer (`ErrNoNode`,
//     ...). Grants record their `Epoch`; `Epoch.Lost` closes when its session
//     is gone (ZooKeeper declared it expired, or the Session closed);
//     `Epoch.Doubted` closes when a suspension of it lasts until it could have
//     expired (see "Suspension is not loss" below).
//   - Goroutines. Each has an owner that waits for it: the Session's
//     (`Session.Go`: the event loop, heartbeats, closing abandoned
//     connections, adding credentials to a new connection, calls cut off by
//     their deadline, `Settle`'s background retries, group-commit drains), a
//     follower's (its loop and its watch forwarders), the API server's
//     (hijacked streams, topic followers), the broker's (its `OnActive` caller
//     and its flushers, stopped and waited for by `Broker.Close`), the Leases'
//     (the epoch watchers, and the releases of holds lost at a doubt, added by
//     a running epoch watcher). An owner that others ask to start work at any
//     time (a request opening a stream, a timer or ZooKeeper's callback arming
//     a watch, a call cut off by its deadline) keeps its goroutines in a
//     `tasks.Group` (`internal/tasks`): the count and the closed flag under
//     one lock, so once its Close has begun a start is refused and the caller
//     answers as closed (a stream opened then ends at once on its request's
//     goroutine; `Session.Go` reports false and starts nothing). A bare
//     `sync.WaitGroup` is kept only where every `Add` happens before `Wait`
//     can begin or under the owner's lock with its closed flag (the Leases'
//     epoch watchers). Shutdown (`internal/sidecar/sidecar.go`) stops the HTTP
//     side, then closes the leases and the session, in that order, and waits
//     for each. The HTTP side stops in the order an upgrade's hand-over uses
//     too (`Main.stopHTTP`, one function for both): streams and long-polls
//     end, the listener is closed, each connection already accepted is given
//     up to 2 s to bring its first request, and the requests under way are
//     answered; a stream or wait opened meanwhile is answered as shut down
//     (`TestShutdownWhileStreamsAndWaitsOpen`).
package kit
