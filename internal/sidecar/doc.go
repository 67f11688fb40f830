// Package sidecar is the coord-sidecar program as a value: Main parses the
// flags and the environment, connects the one ZooKeeper session, builds the
// HTTP surface (api/registry) on it and serves it; Reload, Upgrade and Close
// are SIGHUP, SIGUSR2 and SIGTERM. cmd/coord-sidecar only dispatches
// subcommands and signals to it, and tests run it in their process
// (internal/sidecartest).
//
// # Connections: no client locks the others out
//
// `listen.go` and `conns.go` (issue 40): the main listener holds at most
// --max-conns connections; at the cap, the connection just accepted waits
// for a place while `connStates.reclaimIdle` closes the longest-idle
// kept-alive connection (else the oldest that has not sent a first request
// within a second), so a new client is served while any is idle: the head of
// a list, not a scan, and without waiting for the closed connection's
// goroutine (`limitedConn.reclaim`), so the accept loop keeps up with
// clients that reconnect as fast as they are closed. The ConnState hook keeps
// each connection's state, which also counts coord_http_connections. --idle-timeout is http.Server's IdleTimeout. A
// request read by its Transfer-Encoding closes its connection after the
// answer (`framing`: net/http drops a Content-Length sent with it silently),
// as do 401 and 403 answers (api). `admin.go` serves /healthz, /readyz and
// /metrics on --admin-listen, outside the cap.
//
// # Restarts: --state-dir and SIGUSR2
//
// `internal/sidecar/restart.go` owns the state directory (`internal/statedir`)
// for a run: it takes the directory (one process per directory), loads what
// the predecessor left (a bad file is logged, moved aside, and the start is
// fresh), presents the saved session through `zookeeper.Config.Resume`, and
// keeps the file current with a `statedir.Journal`, durable before every
// answer.
//
// Why a journal, and how a 2xx becomes a promise. The state a successor needs
// is each lease with its holds. The first design wrote a snapshot of all of it
// at most every 20 ms after the answers, so a crash lost what the last 20 ms
// had acknowledged. Writing the snapshot before each answer would cost every
// request a write proportional to every lease the sidecar has (10,000 holds:
// about a megabyte). So the directory holds a base (`state.json`, the whole
// state, replaced by an atomic rename) and a journal (`journal-<n>`, named by
// the base): `kit.Leases.OnChange` tells the Journal which lease, or which
// hold of a lease, changed (one map insert under a short lock, no I/O), and
// `api`'s `commitState` middleware holds a success answer to a request that
// may change state (every `/v1` method but GET and HEAD) until `Commit` has
// written every change recorded before it: each as it now is (a lease's own
// values, one hold granted or let go, a lease ended), one JSON line each, so a
// change costs one line however much its lease holds. Whoever commits writes
// everything recorded so far under the writer's lock, so requests that change
// state at the same time share one write (a group commit, like ZooKeeper's own
// log), and a change that no request waits for (an expiry, a lost hold) is
// written within 20 ms by the Journal's goroutine.
//
// The failure covered is the process's death, not the machine's, and the page
// cache outlives the process. So the journal is a file of at least 4 MiB whose
// blocks are reserved when it is made (`fallocate`), mapped shared into the
// process: an append is a copy into the mapping, with the line's newline
// stored after the rest, and no system call. A process killed at any instant
// leaves whole lines and, at most, a last one without its newline, which
// acknowledged nothing and which `Load` ignores; the rest of the file is
// zeros. A goroutine syncs the file once a second. A write to the journal by
// `write(2)` from a writer goroutine cost the lock rows 20 to 120 µs of CPU a
// cycle (two goroutine switches and a system call per commit); the mapping
// costs a copy. When the journal is full the Journal compacts: a new reserved
// journal, a new base naming it (an atomic rename, synced), the old journal
// removed; a death between any two steps leaves a base whose journal is whole.
// A fault on the mapping (an immutable file, an I/O error, a file system gone
// read-only) would be a SIGBUS: `debug.SetPanicOnFault` makes it a panic that
// the append recovers, as a write error. A write that fails marks the Journal
// failed: `commitState` then refuses every state-changing request with `503
// state-unavailable` before it touches ZooKeeper (and answers it instead of a
// 2xx whose write failed), `/readyz` answers 503, `GET /v1/session` shows
// `stateError`, and the Journal's goroutine retries the compaction, backing
// off to a second, until one succeeds.
//
// Bind first, then resume; write nothing until reconciled. `Main.Run` binds
// its listener (or takes the predecessor's) before it makes the session, so a
// port in use or a bad socket path fails the start before the predecessor's
// session is touched; no failure path of a start closes the session (only
// `Main.Close`, on SIGTERM or SIGINT, does). The Journal starts only once the
// reconcile below is done, and its first write is a compaction of the
// reconciled state, so the files on disk are always a state some process could
// resume: a successor killed at any instant of its start leaves its
// predecessor's. A resume that came back but could not be reconciled within
// its deadline is fatal (`Main.Fatal`): `main` detaches the session and exits
// 1 without writing, for the supervisor's next start to try again.
//
// At start, in the background, `restarts.reconcile` waits for the resume's
// outcome. When the server gives the session back it syncs, then
// `kit.Leases.Restore` re-creates each saved lease (id, TTL, owner, expiry;
// one whose expiry passed meanwhile ends as expired and its nodes are deleted)
// and adopts each hold through its kind's `kit.Kind.Adopt` (the recipe checks
// that the node is the session's own and still stands: a lock's node heads its
// line; the token is its czxid). A hold that cannot be adopted is never kept
// silently: it is recorded on its lease as a `lost-hold`, counted, logged, and
// its nodes deleted. Then `sweep` deletes every protected node of the session
// in the registered kinds' lines that no saved hold names: the nodes of
// requests that were waiting when the predecessor ended, and of grants made
// after its last write (their clients were never told, or their leases are
// unknown). Until this is done, `/v1` requests wait (`api.Options.Restored`)
// and `/readyz` answers 503; too late (the session expired), the leases answer
// 404. A server that dies during all this (the connection drops, the session
// moves to another server) is waited out: the sync, each adoption, each
// deletion and each line's sweep is tried again once the session is back
// (`zookeeper.Epoch.Retry`, within the reconcile's deadline of twice the
// session timeout), so that a hold is neither reported lost nor left in
// ZooKeeper under a session that lives on (`restart_zkfault_test.go`: the
// server dies with the sidecar; before the sync's answer; while the holds are
// adopted). SIGTERM keeps its meaning: everything is released and the session
// closed, so the file is cleared.
//
// One session, one process (`internal/sidecar/owner.go`,
// `internal/zookeeper/owner.go`). The flock excludes a second process on one
// directory, not on a copy of `state.json`: a copy started elsewhere resumes
// the session, and the two go-zookeeper clients would take it from each other
// at every reconnect. With `--state-dir` the Session records the process
// (`zookeeper.Config.Incarnation`: a random incarnation, host, pid, state
// directory) in the ephemeral node `<root>/sessions/0x<id>`, written on every
// session it makes or resumes (over a predecessor's record) before the sidecar
// serves (`Session.WaitClaimed` gates `api.Options.Restored`), read again
// after a `sync` at every reconnect before the session counts as connected,
// and watched in between. Another record means the session was taken: the
// connection is cut beneath go-zookeeper before anything else is sent (as
// `Detach` cuts it), the Session detaches itself, and main's `Abandon` stops
// the HTTP side, clears the state file (a restart then makes a new session
// instead of taking this one back) and exits 3 with an error line naming both
// processes. The newest writer wins, so one process stops and the session
// changes hands back once at most. An upgrade's predecessor never sees its
// successor's record: it has detached before the successor can open the
// directory.
//
// Registered kinds so far: `lock` (`recipes.Locks.Adopt`), one line in
// `Main.Run`, and those below. The bench rows are in docs/BENCHMARKS.md
// ("Restarts"); a hold of a kind not yet registered is reported lost after a
// restart, never kept silently. How users run it under a supervisor is in
// `deploy/` (the package table above).
//
// The planned upgrade (`internal/sidecar/upgrade.go`). On SIGUSR2 the sidecar
// starts the binary now at its path (the path read at start: after a replace,
// `/proc/self/exe` names the deleted file) with its arguments and environment,
// the listening socket as descriptor 3 (`COORD_INHERITED_LISTENER`) and a pipe
// as descriptor 4 on which the successor writes one byte once it has taken the
// socket (and, with --admin-listen, the admin listener as descriptor 5,
// `COORD_INHERITED_ADMIN_LISTENER`, stopped beside the main one). Then, in
// this order: `api.Server.Drain` ends streams (with a
// `retry:` hint) and long-polls (503 with Retry-After, their nodes deleted as
// at any cancelled wait), and a lease whose keepalive stream ends so is not
// revoked; the listener is closed (connections wait in the socket's backlog,
// which the successor shares: none is refused); from `Drain` on every answer
// says `Connection: close`, and the hand-over waits (at most 2 s) until every
// connection left has been idle for 500 ms, because net/http's `Shutdown`
// drops a request it reads after the shutdown began without an answer, and
// closes an idle kept-alive connection under a client that may be sending on
// it (Go's client retries only idempotent requests: BenchmarkUpgradeUnderLoad
// lost a keepalive or a release in 2 of 6 upgrades before); the short requests
// under way are answered (`Shutdown`) (these steps are `Main.stopHTTP`,
// SIGTERM's too, with `Close` in place of `Drain`); the last state is written,
// the session detached (`zookeeper.Session.Detach`: no closeSession) and the
// state directory let go. The successor, which was waiting for the directory
// (`statedir.OpenWait`), loads it and resumes as after a crash. The pid file
// names the old process until the successor owns the directory and writes its
// own pid over it (`statedir.Dir.LeavePID`: the old one's `Close` leaves the
// file), and the old process exits only then (`awaitSuccessorPID`): systemd's
// `PIDFile=` reads the file when the main process exits and takes the live
// process of the unit it names as the new main process
// (`TestUpgradePIDFileNamesTheSuccessorWhenTheOldExits`). We did not take
// `github.com/cloudflare/tableflip`: its upgrade is driven by the successor's
// readiness, while here the order is the state directory's (the successor may
// load the state only once the predecessor has written its last and detached),
// and passing one descriptor and one byte is fewer lines than adapting it. A
// successor that fails before taking the socket leaves the old process serving
// (logged); one that fails after leaves nobody serving: the old process then
// exits 1 (`errSuccessorLost`), so that a supervisor restarting on failure
// starts it again, and that start resumes the session from the directory
// (`TestUpgradeWhoseSuccessorDiesExitsWithAFailure`).
//
// Also registered, one line each in `Main.Run`:
//
//   - `throughput` (`throughput.Throughputs.Adopt`, no `Lines`: members sit
//     under `<group>/members`, and a join never waits): the member node with
//     its weight and demand read again, and the group's follower opened as
//     `Join` opens it, so the sidecar leads again while its node is first; the
//     line unchanged, it computes the published allocation and writes nothing
//     (same leader, term, version and shares). A member joined after the last
//     write of the state file is not swept: its node stays until the session
//     ends.
//   - `partitions` (`partition.Partitions.Adopt`, no `Lines`: fixed member
//     names, no waiting): the member node (its czxid the incarnation) and the
//     session's owner nodes that name it with that incarnation, so an ack or a
//     leave lets them go; the sidecar's member of the group again (takes,
//     leads), the plan unchanged. The session's owner nodes of an older
//     incarnation are deleted. A member joined after the last write is not
//     swept.
//   - `claim` (`queue.Queues.Adopt`, no `Lines`: a waiting claim makes no
//     node): the item's claim marker and `claims/` entry, both the session's
//     and holding the claim id; the claim is this sidecar's again under that
//     id (ack, release). A claim granted after the last write is not swept:
//     its item stays hidden until the session ends.
//
// Also registered, one line each in `Main.Run` (none has `Lines`: their nodes
// have fixed names, made at once, and no request waits in a node):
//
//   - `group` (`group.Groups.Adopt`): the member node `<group>/<id>`, the
//     session's; claimed on this sidecar again. Its value, join order and the
//     group's version are unchanged.
//   - `kv` (`kv.Store.Adopt`): the leased key's node, the session's, with its
//     czxid (so Release deletes only that node); value, content type and
//     version unchanged, and a write with the lease goes on in place.
//   - `barrier` (`barrier.Barriers.AdoptRaised`): the barrier node, the
//     session's and still holding the lease id (not lowered nor taken over
//     meanwhile); it stays raised.
//   - `double-barrier` (`barrier.Barriers.AdoptParticipant`): the participant
//     node `p-<id>`, the session's and carrying the lease id; its count read
//     again, enrolled here again. An enter that was waiting at the kill does
//     not withdraw it (its hold was granted before the wait): the lease's next
//     enter goes on waiting; an implicit lease's participant goes with the
//     lease's TTL.
//
// None of these four is swept: a member, key, barrier or participant granted
// after the last write of the state file stays until the session ends.
//
// Also registered, one line each in `Main.Run`, these kinds whose things are
// lines of contender nodes (each adopter starts with `kit.ProtectedNode`: one
// protected node of the thing's line, the resumed session's own):
//
//   - `semaphore` (`recipes.Semaphores.Adopt`, `Lines` with `Parts` `locks`
//     and `leases`: `kit.Kind.Parts` names the lines of a thing that has more
//     than one, for the sweep): the permit's lease node, owner and max from
//     its data; a permit stands while its node does. A request waiting at the
//     kill held a node in `locks` (the internal mutex), which the sweep
//     deletes.
//   - `rwlock` (`recipes.RWLocks.Adopt`, `Lines`): a writer's node still heads
//     its line, a reader's has no writer before it; mode from the node's
//     infix, token its czxid.
//   - `candidate` (`election.Elections.Adopt`, `Lines`): the node names the
//     candidate; it keeps its place in line, so a leader keeps its term and a
//     follower stays a candidate. A campaign still waiting (`wait=`) at the
//     kill is swept.
package sidecar
