#!/usr/bin/env node
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
// Environment: COORD_ADDR (default http://127.0.0.1:8080), VALUE (published with
// the candidate; default the host name), TTL (seconds, default 10), EVENTS,
// TIMEOUT. Node 18+ standard library only (global fetch).
import { hostname } from "node:os";

const addr = process.env.COORD_ADDR ?? "http://127.0.0.1:8080";
const [election, me = `candidate-${process.pid}`] = process.argv.slice(2);
if (!election) {
  console.error("usage: node follow-election.mjs ELECTION [ID]");
  process.exit(2);
}
const maxEvents = Number(process.env.EVENTS ?? 0);
const timeout = Number(process.env.TIMEOUT ?? 0);
if (timeout > 0) setTimeout(() => process.exit(0), timeout * 1000);

// call sends one request (body as JSON) and returns the decoded JSON answer; an
// HTTP error throws with the problem document.
async function call(method, path, body) {
  const res = await fetch(addr + path, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

// events yields {event, data} for each server-sent event of the stream at path.
async function* events(path) {
  const res = await fetch(addr + path);
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  const decoder = new TextDecoder();
  let buf = "", event = "", data = [];
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line === "") {
        // a blank line ends an event; ":" lines are comments
        if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
        event = "";
        data = [];
      }
    }
  }
}

// 1. Enrol. The answer (201) is {"candidate","leader","lease","name","term"}.
const query = new URLSearchParams({ id: me, ttl: `${process.env.TTL ?? 10}s` });
let c;
try {
  c = await call("POST", `/v1/elections/${election}/candidates?${query}`, {
    value: process.env.VALUE ?? hostname(),
  });
} catch (err) {
  console.error(`follow-election.mjs: could not enrol: ${err.message}`);
  process.exit(1);
}
console.log(`enrolled ${me} leader ${c.leader} term ${c.term}`);

// 2. Keep the candidacy's lease alive by holding its event stream open: the lease
//    does not expire while the stream is open, and is revoked when it closes (when
//    this process exits). The stream's last event says how the lease ended.
(async () => {
  let last;
  for await (const { event } of events(`/v1/leases/${c.lease}/events`)) last = event;
  throw new Error(`the lease ended (${last})`);
})().catch((err) => {
  console.error(`follow-election.mjs: ${err.message}`);
  process.exit(1);
});

// 3. Follow the election: one `leader` event (data: the election, as GET
//    /v1/elections/ELECTION answers it) now, then one on every change.
let last, printed = 0;
for await (const { data } of events(`/v1/elections/${election}/events`)) {
  const leader = data.leader; // {candidate, since, term, value} or null
  const now = leader ? `leader ${leader.candidate} term ${leader.term}` : "leader none";
  if (now === last) continue; // only the line of candidates changed
  console.log(now);
  last = now;
  if (++printed === maxEvents) process.exit(0);
}
console.error("follow-election.mjs: the event stream ended");
process.exit(1);
