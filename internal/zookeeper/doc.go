// Package zookeeper is coord-sidecar's ZooKeeper layer, and the only package that
// imports go-zookeeper (in the manner of Vitess's zk2topo). Recipes see typed,
// context-first calls on an Epoch (one ZooKeeper session) and the few protocols
// every recipe needs, each written once here:
//
//   - Session: one connection to the ensemble, replaced when its session expires;
//     its state (connecting, connected, suspended, lost, closed), its doubt
//     (InDoubt, doubt.go) and the Epoch every grant is bound to.
//   - Calls: Get, GetW, Children, ChildrenW, Exists, ExistsW, Create, Set, Delete
//     and Multi, each bounded by its deadline (see Epoch.call); ChildrenShared
//     coalesces concurrent listings of one parent; SharedMulti groups
//     independent callers' small transactions into one (GroupCommit).
//   - Protocols: protected sequential create with adoption after a lost answer
//     (CreateProtected), ephemeral create with adoption (CreateOwned),
//     delete-until-gone (DeleteProtected, Settle), wait-for-connected
//     (WaitConnected), parents made on demand (EnsurePersistent, CreateIn,
//     EnsureContainer).
//   - Resume (resume.go, on internal/zookeeper/transport): a successor takes
//     over its predecessor's session (Config.Resume, WaitResume) through the
//     dialer; Detach hands it over without closing it.
//   - The last zxid on the wire (internal/zkwire, around the handshake's
//     wrapper): go-zookeeper's own field for it is a data race on reconnect.
//   - One mapping of ZooKeeper errors (errors.go).
//
// Caveats every caller must respect:
//
//   - go-zookeeper's calls take no context. A call here fails fast when its
//     context has ended or the session is not connected; once sent, it returns
//     by its deadline (the context's, or Config.OpTimeout, whichever is sooner)
//     and in any case within about one session timeout. A call cut off that way
//     may still be applied: writes are idempotent or recoverable (protected
//     creates).
//   - A grant belongs to the Epoch under which it was made. When that session is
//     lost (expired, never merely unreachable), Epoch.Lost closes; the grant is
//     lost, never carried over to the next session, which the Session dials by
//     itself. A loss is reported before anyone else can be granted: at a doubt
//     of the session (Epoch.Doubted), a third of its timeout before the ensemble
//     can expire it.
//   - While the session is suspended (disconnected, maybe still alive on the
//     server) calls answer ErrUnavailable: nothing may be granted then. But
//     suspension is not loss (doubt.go): grants stand until the suspension
//     lasts until the session could have expired (Epoch.CouldHaveExpiredAt,
//     two thirds of the timeout after ZooKeeper last answered); then
//     Epoch.Doubted closes and what was granted is to be reported lost, while
//     the Session keeps reconnecting with the same session. Only a session
//     ZooKeeper declares expired is lost (Epoch.Lost) and replaced.
//   - Fencing tokens are creation zxids (czxid), never sequence numbers.
package zookeeper
