// Package api is what every recipe's HTTP side shares, on [Server]: the
// middleware (bearer tokens, the checks of openapi.yaml's query parameters and
// JSON bodies), the one mapping of errors to problem documents, paging, what a
// request says of its hold and lease, the broker of event streams, the
// session's and health operations, and the registration of a recipe
// ([Server.Register]). The recipes' handlers live in api/<recipe> and are
// composed in api/registry.
//
// What it guarantees: a request the contract does not allow (an undeclared
// query parameter or body field, a body that is not one JSON value of the
// declared Content-Type) is refused with a 4xx problem before a handler runs;
// every error a handler returns is written as an RFC 9457 problem document
// whose type docs/PROBLEMS.md lists, a lost ZooKeeper session as 503
// session-lost, an error nothing maps as 500 internal.
package api
