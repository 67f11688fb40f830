// Package counter keeps signed 64-bit counters in ZooKeeper, in the layout of
// Curator's DistributedAtomicLong: counters/{name} holds the value as 8 bytes,
// big-endian (an absent node, or one with no data, is 0), so Curator processes
// and the sidecar add to one counter.
//
// An add is a compare-and-set on the node's data version, retried on conflict,
// as Curator's optimistic mode does. Adds to one counter that arrive on this
// sidecar while its compare-and-set is under way are combined into the next
// one: a hot counter costs ZooKeeper one write per batch, not one per add. Each
// add still answers the value right after its own add (the batch's value before
// it plus the adds ahead of it in the batch), so every answer is a value the
// counter had in some order of the adds.
//
// An add that would take the value past the int64 range is refused with an
// *OverflowError (the counter keeps its value); the other adds of its batch go
// on. A node whose data is neither empty nor 8 bytes is not a counter
// (ErrCorrupt), and is left alone.
//
// Delete removes counters/{name} and nothing else, as deleting the node under
// Curator would: a counter read after it is 0.
package counter
