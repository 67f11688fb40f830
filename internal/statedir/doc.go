// Package statedir keeps what a sidecar's successor process needs to resume its
// ZooKeeper session and every lease: the state directory of --state-dir. It
// knows neither ZooKeeper nor HTTP; the sidecar fills a State and reads it back.
//
// A state directory holds:
//
//   - coord-sidecar.lock: the lock file. One process owns the directory: it
//     holds an exclusive flock(2) on this file, which the kernel drops when the
//     last descriptor of it is closed, so when the owner dies, however it dies.
//     A second process on the directory fails at once naming the owner's pid
//     (Open) or waits for it to end (OpenWait). For a planned hand-over the
//     owner passes the locked descriptor to its successor (File, Adopt), so that
//     the directory is never unowned and never owned by two unrelated processes.
//   - coord-sidecar.pid: the pid of the process that serves (WritePID).
//   - state.json: the State, a versioned JSON record (Save, Load), written by a
//     rename so that a crash during a write leaves the previous state standing.
//     Saver coalesces the request path's changes into at most one write per
//     interval.
//
// Files are created 0600 and the directory 0700: the state carries the
// session's password, which is all it takes to act as the sidecar on ZooKeeper.
// A directory that already exists with group or world permissions is tightened
// to 0700 (systemd's StateDirectory= makes 0755 unless told otherwise, and a
// Kubernetes emptyDir is 0777: refusing them would only teach every operator a
// setting); a directory owned by another user is refused, since its owner can
// read and replace what is written there whatever its mode.
//
// Caveats: the lock is flock(2), advisory and per open file description: two
// opens of the lock file in one process exclude each other as two processes
// do. It is reliable on local file systems; on NFS, flock is emulated with
// byte-range locks by Linux and should not be trusted for this: keep the state
// directory on a local disk (or a Kubernetes emptyDir, which is node-local).
package statedir
