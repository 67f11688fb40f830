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
package kit
