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
//
// # Suspension is not loss
//
// A ZooKeeper server cannot expire a session sooner than its negotiated
// timeout after it last heard from it, and a server that answers a call sent
// at S has heard from the client at S or later. So while the connection is
// *suspended* (dropped, the session perhaps alive), nothing the session holds
// can have gone to anyone else before `Epoch.LastAnswered` plus the timeout.
// The layers use that as follows (issue 36):
//
//   - The Session (`internal/zookeeper/session.go`, `doubt.go`) never abandons
//     a session the ensemble may still hold. Its heartbeats (every tenth of
//     the timeout) declare the suspended epoch *in doubt* once the time since
//     ZooKeeper last answered passes two thirds of the timeout
//     (`Epoch.CouldHaveExpiredAt`, `suspension.go`): `Epoch.Doubted`'s channel
//     closes (and is replaced: the same session can come back and be doubted
//     again), `Session.InDoubt` turns true and `Session.Changed` closes; no
//     session event is sent (the session stays `suspended`) and the connection
//     is kept, go-zookeeper presenting the same session to every server in
//     turn. Only `zk.StateExpired` (the server's word) loses the epoch
//     (`Session.lose`: `Epoch.Lost` closes, the connection is closed, a new
//     session dialed). A connection that goes silent while connected is
//     dropped by go-zookeeper within 2/3 of the timeout after its last answer
//     (its receive deadline), which makes it a suspension.
//   - The leases (`recipes/kit/lease.go` `watchEpoch`, `hold.go` `loseAll`)
//     end every hold of the doubted epoch's leases as lost (`lost-hold`,
//     counted in `coord_holds_lost_total`), a third of the timeout before the
//     ensemble can grant any of it to another client: a loss is always
//     reported before anyone else is granted. The leases themselves live on.
//     Each lost holding's `Release` runs in the background and deletes its
//     nodes through `Epoch.Settle`, which waits for the same session to be
//     connected again and deletes them at once (others need not wait for the
//     expiry); if the session is lost instead, its nodes went with it. A grant
//     made while the session is in doubt is refused (`grant`, under the
//     lease's lock, so a grant either sees the doubt or is lost with the
//     rest); acquisitions under way (a waiter's node) go on under the same
//     session.
//   - Followers (`recipes/kit/follow.go`) show the last state read, marked
//     suspended since `Session.Suspension`'s instant, during the first part of
//     a suspension, and nobody vouched for once in doubt (`kit.Uncertainty`).
//     After the reconnect everything is read again (stale watches); the state
//     is published only if it differs, so a stream shows a suspension as one
//     event at its start and one at its end.
//   - The wrappers (`internal/ctl/wrap.go`) keep their command through a
//     suspension: `elect` ends a turn only on another leader or none (a
//     suspended event still naming its candidate does not), and both stop the
//     command on the lease's `lost-hold` or loss, which come exactly at the
//     doubt or at the expiry.
//
// # Resuming a session
//
// ZooKeeper gives a live session back to any client that presents its id and
// password in the ConnectRequest, on any server of the ensemble; go-zookeeper
// v1.0.4 (the fixed stack) has no option for it. What it does have is a
// dialer: every connection it makes comes from `zk.WithDialer`, and its
// handshake is one write (the ConnectRequest) and one answer (the
// ConnectResponse) on it. So each `Epoch` wraps the connections of
// `transport.Dialer` (plain or TLS alike) with its `transport.Handshake`
// (`internal/zookeeper/transport/handshake.go`; the outcome is
// `transport.Resume`, waited for by `Session.WaitResume` in
// `internal/zookeeper/resume.go`):
//
//   - The first write of a connection of the first epoch, while
//     `Config.Resume` is still unanswered, is rewritten to name that session
//     and its password (go-zookeeper's own request names none; `lastZxidSeen`
//     stays its 0, which servers accept: one above theirs they refuse). A
//     request not laid out as v1.0.4 writes it is not rewritten but reported.
//   - The first answer of every connection is read as it passes: the session
//     id, password and negotiated timeout go to `Epoch.Resumable` (what the
//     state directory saves), and the id tells `Session.WaitResume` whether
//     the session came back. After these two this wrapper passes bytes through
//     with one flag test; the last zxid's wrapper (below) reads each packet's
//     header.
//   - A server that dies before its answer (refused, or the connection ends
//     first): nothing was answered, so the next connection (go-zookeeper's
//     next server) presents the session again; the server that answers gives
//     it back.
//   - Too late: an expired session or a wrong password is answered with
//     session 0; go-zookeeper reports the session expired and makes a new one
//     on the same `zk.Conn`. The Session does not count that as a loss
//     (nothing was granted yet): the first epoch goes on with the new session,
//     `WaitResume` answers `transport.ErrResumeTooLate`, a warning is logged
//     and `coord_zk_session_resumes_total{outcome="too_late"}` counts it.
//   - Handing over: go-zookeeper's `Close` always sends closeSession, which
//     deletes every ephemeral node. `Session.Detach` closes the connection
//     beneath go-zookeeper first and refuses any new dial, then stops as
//     `Close` does; the session lives on until its timeout or a successor's
//     resume.
//
// What breaks it: a go-zookeeper that stops dialing through `WithDialer`,
// splits the ConnectRequest over writes or changes its layout, or sends a
// session id of its own on the first connection. Each makes `WaitResume`
// answer `transport.ErrResumeTooLate` (a request that bypasses the wrapper is
// noticed when the session connects without an answer having been seen), and
// the tests of `internal/zookeeper/resume_test.go` (detach then resume, on
// another server of a 3-node ensemble, over TLS, too late after expiry, wrong
// password) and `internal/zookeeper/transport/wire_test.go` (the request's
// rewrite, the answer's parse) fail. Not carried over: watches (a successor
// re-arms its followers and reads every state again) and the zxid (a successor
// may land on a server behind its predecessor's last write: `sync` before
// reading). Two processes resuming one session take it from each other: the
// state directory's lock keeps that to one.
package zookeeper
