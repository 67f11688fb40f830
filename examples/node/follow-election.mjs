#!/usr/bin/env node
// @ts-check
// Enrol in a leader election, then print every change of leader as it happens.
//
//   node follow-election.mjs ELECTION [ID]
//
// Prints "enrolled ID leader true|false term T", then one line per change of
// leader, the current one first: "leader CANDIDATE term T" ("leader none" while
// there is none). Stops after $EVENTS leader lines or $TIMEOUT seconds (0, the
// default for both: no limit), or on Ctrl-C. Leaving closes the lease's stream,
// which ends the candidacy at once: the next candidate leads.
//
// A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
// --state-dir) ends its streams: they are opened again (with Last-Event-ID), after
// 50 ms doubling to 1 s, and the candidacy goes on. The program exits 1 when the
// sidecar says the lease is gone (404, or its stream's last event), or when the
// sidecar cannot be reached for TTL seconds (the lease expired then).
//
// Environment: COORD_ADDR (a URL or host:port; default http://127.0.0.1:8080),
// VALUE (published with the candidate; default the host name), TTL (seconds,
// default 10), EVENTS, TIMEOUT. Talks to the sidecar through the typed client of
// client.mjs (run `npm ci --omit=dev` here once).
import { hostname } from "node:os";
import { client, events, message, ok } from "./client.mjs";

const [election, me = `candidate-${process.pid}`] = process.argv.slice(2);
if (!election) {
  console.error("usage: node follow-election.mjs ELECTION [ID]");
  process.exit(2);
}
const maxEvents = Number(process.env.EVENTS ?? 0);
const ttl = Number(process.env.TTL ?? 10);
const timeout = Number(process.env.TIMEOUT ?? 0);
if (timeout > 0) setTimeout(() => process.exit(0), timeout * 1000);

// 1. Enrol. The answer (201) is a Candidacy: {"candidate","leader","lease","name","term"}.
let c;
try {
  c = ok(
    await client.POST("/v1/elections/{name}/candidates", {
      params: { path: { name: election }, query: { id: me, ttl: `${ttl}s` } },
      body: { value: process.env.VALUE ?? hostname() },
    }),
  );
} catch (err) {
  console.error(`follow-election.mjs: could not enrol: ${message(err)}`);
  process.exit(1);
}
console.log(`enrolled ${me} leader ${c.leader} term ${c.term}`);

// 2. Keep the candidacy's lease alive by holding its event stream open: the lease
//    does not expire while the stream is open, and is revoked when it closes (when
//    this process exits). The stream's last event says how the lease ended. After
//    a restart of the sidecar the stream is opened again (events, client.mjs)
//    unless the lease is gone, or TTL passed without reaching the sidecar.
const lease = c.lease;
(async () => {
  let last;
  for await (const { event } of events("/v1/leases/{lease}/events", { lease }, ttl)) {
    last = event;
    if (event === "lost" || event === "expired" || event === "revoked") break;
  }
  throw new Error(`the lease ended (${last})`);
})().catch((err) => {
  console.error(`follow-election.mjs: ${message(err)}`);
  process.exit(1);
});

// 3. Follow the election: one `leader` event (data: the Election, as GET
//    /v1/elections/ELECTION answers it) now, then one on every change.
let last, printed = 0;
for await (const { data } of events("/v1/elections/{name}/events", { name: election })) {
  const leader = data.leader; // {candidate, since, term, value} or null
  const now = leader ? `leader ${leader.candidate} term ${leader.term}` : "leader none";
  if (now === last) continue; // only the line of candidates changed
  console.log(now);
  last = now;
  if (++printed === maxEvents) process.exit(0);
}
