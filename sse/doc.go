// Package sse serves server-sent events (SSE): a [Broker] that fans events
// out to subscribers by topic, a [Writer] that writes them to one HTTP
// response, and [Serve], which pumps one into the other with heartbeats.
// It knows neither HTTP routes nor ZooKeeper.
//
// # Contract
//
// A stream is text/event-stream. Every event has an id: line (omitted when
// [Event.ID] is empty), an event: line (omitted when [Event.Name] is empty) and
// one data: line per line of [Event.Data], then a blank line. Data is meant to
// be one line of JSON (see [Data]); data that contains CR, LF or CRLF is split
// into several data: lines, which an EventSource joins back with "\n".
//
// The broker is state-based, not log-based: each topic keeps only its last
// published event (its current state), and a new subscription receives that
// state as its first event. A client that reconnects, with or without
// Last-Event-ID, therefore misses no change of state, although it may miss
// intermediate states and may see the state it already had once more. The
// broker keeps no history and does not read Last-Event-ID (its server may, to
// number the new stream on: see below).
//
// Event ids are supplied by the publisher (a ZooKeeper zxid, or a counter
// formatted as decimal) and should increase within a topic; the broker does
// not check them. On a combined stream ([Broker.SubscribeMany]) the ids of
// different topics interleave and need not increase, and an event carries no
// topic of its own: put the topic in [Event.Name] or in the data.
//
// Or a subscription numbers its events itself ([Subscription.NumberFrom]):
// then every event it gives out carries the next of its own ids, consecutive
// from the number given on, whatever id its publisher gave. A filtered
// subscriber ([Broker.SubscribeFiltered]) so numbered learns nothing, from
// gaps in its ids, of the events it does not carry; a server that numbers a
// reconnecting client's stream on from the client's Last-Event-ID keeps its
// ids increasing across the reconnect. Such events are framed once per
// subscriber rather than once per publication.
//
// # Caveats
//
//   - [Serve] writes a comment line every heartbeat (15 s by default) so that
//     proxies and load balancers do not close an idle stream. Compression or
//     buffering middleware in front of the handler defeats streaming; the
//     X-Accel-Buffering: no header only tells nginx.
//   - [NewWriter] sets a write deadline before every write through
//     [http.ResponseController], so a client that stops reading is cut off
//     after writeTimeout; this also overrides [http.Server.WriteTimeout] for
//     the stream. A ResponseWriter that cannot flush is refused.
//   - [http.Server.Shutdown] neither cancels request contexts nor waits for
//     them to end by itself. Register [Broker.Close] with
//     [http.Server.RegisterOnShutdown] (or call it before Shutdown): every
//     [Serve] then writes the events still buffered and returns, and each
//     response ends with a proper end of body, so clients see a clean end
//     of stream rather than a reset connection.
//   - A subscriber that falls [Options.Buffer] events behind is disconnected
//     ([ErrSlowSubscriber]) rather than slowing the publisher or the other
//     subscribers; its client reconnects and gets the current state. Keyed
//     topics ([Broker.PublishKeyed]) never drop a subscriber read by [Serve]:
//     it takes the keys changed since it last took, each in its latest state,
//     so with many keys it coalesces changes instead of queueing them.
//   - A stream served over a hijacked socket ([Hijack] of a plain TCP or Unix
//     connection; one over TLS is written by Serve) is written by a few
//     flusher goroutines the broker owns: each event is framed once per
//     publication, and a flusher writes it to every subscriber's socket that
//     takes it without blocking; the stream's own goroutine (in [Serve]) is
//     woken only to write what a full socket left, blocking under the write
//     deadline, before anything newer. Order, no loss and no duplication are
//     as with Serve alone. [Broker.Close] stops the flushers and waits.
//   - Browsers allow about six HTTP/1.1 connections per origin; prefer one
//     combined stream per page over one stream per topic, or HTTP/2.
//   - [Options.OnActive] callbacks run one at a time on a goroutine the
//     broker owns; a slow callback delays later callbacks (never Publish or
//     Subscribe). A callback must not call [Broker.Close].
package sse
