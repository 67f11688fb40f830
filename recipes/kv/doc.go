// Package kv keeps shared configuration in ZooKeeper: keys whose values are raw
// bytes, written with compare-and-set on the node's version, optionally leased
// (ephemeral: a key that vanishes with its lease), and followed by one watch per
// key per sidecar however many clients follow it.
//
// Layout, under the session's root:
//
//	kv/{key}       the value's bytes exactly, nothing added: Curator's NodeCache
//	               and SharedValue and kazoo's DataWatch read the same value, and
//	               their writes are values here. The key's version is the
//	               node's data version (Curator's VersionedValue, kazoo's
//	               ZnodeStat.version), so compare-and-set interoperates.
//	kv-meta/{key}  the value's Content-Type, written in the same transaction as
//	               the value. A transaction's changes share one zxid, so the type
//	               belongs to the value exactly when the two nodes' mzxid are
//	               equal; any write that did not set it (another client's, or one
//	               with the default type) leaves them different and the value
//	               reads as application/octet-stream. Nothing but this check ever
//	               ties the two, so a foreign writer can never be shown a stale
//	               type, and the value node stays the plain bytes.
//
// Caveats: the version is ZooKeeper's data version, so a key deleted and made
// again starts at 0 again (compare-and-set across a delete can see the same
// version twice, as with Curator's SharedValue). A key written with a lease is
// an ephemeral node of the sidecar's session; it ends with the lease, and with
// the session. A meta node left by a key another client deleted stays until the
// key is written or deleted through a sidecar; it is never shown for a value it
// was not written with.
package kv
