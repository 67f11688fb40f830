// Package queue is the durable queue recipe: FIFO within a priority (0..99, 0
// first), exactly one taker per item, items persistent (they outlive their
// producer and every sidecar), and claims for at-least-once processing. It is
// built on the recipe kit (recipes/kit) and the ZooKeeper layer
// (internal/zookeeper).
//
// # Layout
//
// The ZooKeeper recipes page keeps a queue as sequential children of one parent and
// takes by listing it. Listing a 200,000-item parent is megabytes per call (above
// the 1 MiB jute.maxbuffer clients enforce) and every take would pay for the whole
// depth. Items are therefore kept in bounded buckets:
//
//	<root>/queues/<name>/p<NN>/b<10 digits>/i<H>-<token>-<seq>   an item (persistent sequential)
//	<root>/queues/<name>/p<NN>/b<10 digits>/i<H>-<token>-<seq>/claim   its claim marker (ephemeral)
//	<root>/queues/<name>/claims/<item id>                         the same claim, indexed (ephemeral; container parent)
//	<root>/queues/<name>/receipts/<item id>.<random>              a take's receipt (ephemeral; container parent)
//	<root>/queues/<name>/delayed/d<due ms>-p<NN>-<H>-<token>-<seq>  a delayed item (persistent sequential; container parent)
//
// Take order is priority, then bucket number, then sequence. An item's data is a
// 2-byte header, the content type, then the payload; H, the header length, is in
// the name so that a listing can report sizes from a Stat; the random token finds
// the item again when the answer to its create is lost with the connection.
//
// # Producers
//
// Only the newest bucket of a priority (the tail) is open, and "open" is its data
// version 0. An enqueue is one transaction: Check(tail, version 0) +
// Create(tail/i…, sequential). Whoever gets back a sequence >= 1000 closes the tail
// and opens the next bucket in one transaction: SetData(tail, version 0→1) +
// Create(next). A producer whose cached tail is stale (closed, or closed, drained
// and deleted) fails its Check as a whole and looks the tail up again, so no item
// is ever written behind items of a newer bucket. Concurrent enqueues of one
// sidecar to one priority are grouped into transactions (group commit) of up to
// 128 items, sent one at a time in the order the enqueues arrived, so each
// producer's own items stay in its order.
//
// # Takers
//
// A sidecar keeps, per queue and priority, what it learned of the order: the
// sorted names of the head buckets it listed, and whether the last one was
// closed. A take pops the first cached item, reads it (Get) and deletes it; the
// delete decides the one winner, so an item another sidecar took (NoNode) is
// simply skipped. The head bucket is listed again only when the cache runs out,
// about once per 1,000 takes, and a closed bucket found empty is deleted; so a
// take costs two round trips plus 1/1000 of a 1,000-name listing whatever the
// depth. Priorities and empty tails are watched, so a sidecar learns of a new
// item in a higher priority without polling, and a waiting take wakes on it.
//
// # Claims
//
// A claim is Multi(Create(item/claim), Create(claims/<item id>)), both ephemeral
// nodes of the sidecar's session, held by a lease (implicit, from ttl=, when none
// is given) through the kit's hold protocol. A take's Delete fails on an item
// that has a child (NotEmpty), so claims and takes exclude each other atomically
// without any extra operation on the take path. Ack is Multi(delete both
// markers, delete the item); release (and the end of the claim's lease: revoked,
// expired, or its session lost) deletes the markers, and the item is visible
// again in its old place, because takers keep claimed items in their cache and
// skip them while claimed. Each sidecar watches claims/ to skip items claimed
// elsewhere without trying them, and to learn of releases. A sidecar killed with
// claims in hand loses no item: its session expires on the server, which deletes
// the markers; the items were never touched. Ack and release are answered by the
// sidecar that holds the claim's lease (as leases are); elsewhere the claim is
// not found.
//
// # Delayed items
//
// An item enqueued with a due time in the future (EnqueueDelayed) waits under
// delayed/, named by its due time (Unix milliseconds, 13 digits), its priority,
// header length and token, with the item's data; takers never list it, so the
// take path is unchanged. A lost create answer is settled by the token, as an
// enqueue's is. The enqueue answers "delayed.p<NN>.i<H>-<token>-<seq>"; the item
// is taken under its new id, which has the same token.
//
// When it is due, a sidecar moves it: one transaction deletes the delayed node
// and creates the item at the end of its priority (Check(tail, version 0) +
// Delete(delayed node) + Create, sent by the priority's enqueue batcher, alone in
// its batch), so whichever sidecar's delete succeeds moves it, exactly once; one
// that finds it gone moves on, and a lost answer is settled by the delayed node
// being gone. Movers: every sidecar with state for the queue (it took, claimed or
// enqueued a delayed item there) watches delayed/ and keeps a timer for the
// earliest item not yet due, which moves the due items on a goroutine of the
// Session and wakes waiting takers; and every take or claim moves what is due
// before it looks at the queue (from its cached view of delayed/, so it costs
// nothing when nothing is due), so an idle sidecar's next take sees due items.
//
// Order. A mover moves the due items it knows of in due order (then by
// sequence), one at a time, and a move lands behind every move applied before
// it; a mover that finds an item moved by another goes on to the next. So
// delayed items of one priority are taken in due order, whichever sidecars move
// them, except two whose due times are closer than the sidecars' clock skew
// (due times are compared with the moving sidecar's clock), or than the time a
// watch takes to tell a mover of an item just enqueued (milliseconds). Priority
// still comes first. An item enqueued without delay goes to the end of its
// priority at once: if no sidecar of the queue was running when a delayed item
// came due, items enqueued meanwhile are taken before it (the next take or
// claim moves it, behind them).
//
// # Goroutines
//
// The claims watchers, the background deletes of take receipts and of claim
// markers (Epoch.Settle), the enqueue flushes left pending and the moves of due
// delayed items run on the Session's goroutines (Session.Go), which
// Session.Close waits for; Close stops the delayed items' timers. The
// goroutines that forward the cursors' watches belong to the Queues: Close,
// called after the Session's Close, waits for them.
package queue
