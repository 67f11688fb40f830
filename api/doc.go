// Package api is the HTTP side the recipes share: the Server (middleware,
// problems, paging, the leases and tokens of a request, the broker and its
// event streams, the picture), and the contract between it and each recipe's
// HTTP side, which lives in a folder of its own (api/locks, api/queues, ...).
//
// A recipe's HTTP side is a type that implements Recipe: its methods serve
// the recipe's operations of openapi.yaml, Tokens names its token kinds, and
// Setup makes the recipe on the session and returns its Descriptor: its
// topics, its sections of the picture, the problems of its own errors, how a
// successor adopts its holds, and what to close at the end. A recipe with
// settings of its own also implements Flagged: its flags join the sidecar's
// command line (each with its COORD_ environment variable and --help line)
// and their values reach Setup (Env.Flags). api/registry
// embeds every such type in its Server, one line each, and sets each one up;
// every list the rest of the sidecar keeps of the recipes is derived from
// what they describe.
//
// Glossary: four words name four different things a recipe declares.
//
//   - hold kind: what a lease holds, kit.Hold.Kind ("lock", "semaphore",
//     "candidate", "claim"). It keys the holds a state directory keeps and the
//     kit.Adoption that re-creates them after a restart
//     (Descriptor.Adoptions), and labels the lost holds in the metrics.
//   - topic kind: the first part of a broker topic that a recipe's event
//     stream follows ("lock" in "lock/db"; Descriptor.Topics).
//   - token kind: the first path segment under /v1/ whose names a token's
//     allow entries govern ("locks" in /v1/locks/db and in the allow entry
//     "locks/db-*"; Recipe.Tokens, api/tokens).
//   - section: one kind of thing the picture shows (GET /v1/events, the
//     status page): its keys "<section>/<name>", its event name, its
//     directory under --zk-root and the token kind that reaches its names
//     (picture.Section; Descriptor.Sections).
//
// For one recipe the words often agree, but not always: the partition groups
// are hold kind, topic kind, token kind and section "partitions"; the fair
// lock is hold kind "lock", topic kind "lock", token kind "locks" and section
// "lock"; a leader election's hold kind is "candidate".
//
// What it guarantees: a request the contract does not allow (an undeclared
// query parameter or body field, a body that is not one JSON value of the
// declared Content-Type) is refused with a 4xx problem before a handler runs;
// every error a handler returns is written as an RFC 9457 problem document
// whose type docs/PROBLEMS.md lists, a lost ZooKeeper session as 503
// session-lost, an error nothing maps as 500 internal.
package api
