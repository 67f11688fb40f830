#!/usr/bin/env node
// @ts-check
// Join a throughput group, then print this member's share whenever it changes.
//
//   node throughput-share.mjs GROUP [ID]
//
// Prints "joined ID", then "share S version V": first the share the join answered,
// then one line each time the group's allocation gives this member another share.
// Stops after $EVENTS share lines or $TIMEOUT seconds (0, the default for both: no
// limit), or on Ctrl-C. Leaving closes the lease's stream, which ends the
// membership at once: the others share the limit.
//
// A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
// --state-dir) ends its streams: they are opened again (with Last-Event-ID), after
// 50 ms doubling to 1 s, and the membership goes on. The program exits 1 when the
// sidecar says the lease is gone (404, or its stream's last event), or when the
// sidecar cannot be reached for TTL seconds (the lease expired then).
//
// Environment: COORD_ADDR (a URL or host:port; default http://127.0.0.1:8080),
// WEIGHT (default 1), TTL (seconds, default 10), EVENTS, TIMEOUT. Talks to the
// sidecar through the typed client of client.mjs (run `npm ci --omit=dev` here once).
import { client, events, message, ok } from "./client.mjs";

const [group, me = `member-${process.pid}`] = process.argv.slice(2);
if (!group) {
  console.error("usage: node throughput-share.mjs GROUP [ID]");
  process.exit(2);
}
const maxEvents = Number(process.env.EVENTS ?? 0);
const ttl = Number(process.env.TTL ?? 10);
const timeout = Number(process.env.TIMEOUT ?? 0);
if (timeout > 0) setTimeout(() => process.exit(0), timeout * 1000);

// 1. Join. The answer (201) is a ThroughputShare: {"group","id","lease","share","version"}.
let joined;
try {
  joined = ok(
    await client.POST("/v1/throughput/{group}/members", {
      params: {
        path: { group },
        query: { id: me, weight: Number(process.env.WEIGHT ?? 1), ttl: `${ttl}s` },
      },
    }),
  );
} catch (err) {
  console.error(`throughput-share.mjs: could not join: ${message(err)}`);
  process.exit(1);
}
let share = joined.share, printed = 1;
console.log(`joined ${me}\nshare ${share} version ${joined.version}`);
if (printed === maxEvents) process.exit(0);

// 2. Keep the membership's lease alive by holding its event stream open: the lease
//    does not expire while the stream is open, and is revoked when it closes (when
//    this process exits). The stream's last event says how the lease ended. After
//    a restart of the sidecar the stream is opened again (events, client.mjs)
//    unless the lease is gone, or TTL passed without reaching the sidecar.
const lease = joined.lease ?? "";
(async () => {
  let last;
  for await (const { event } of events("/v1/leases/{lease}/events", { lease }, ttl)) {
    last = event;
    if (event === "lost" || event === "expired" || event === "revoked") break;
  }
  throw new Error(`the lease ended (${last})`);
})().catch((err) => {
  console.error(`throughput-share.mjs: ${message(err)}`);
  process.exit(1);
});

// 3. Follow the group: `throughput` events (data: the ThroughputGroup, as GET
//    /v1/throughput/GROUP answers it), the current allocation first, then every
//    new one; `leader` events (a new computing member) do not matter here.
for await (const ev of events("/v1/throughput/{group}/events", { group })) {
  if (ev.event !== "throughput") continue;
  const g = ev.data;
  if (g.version < joined.version) continue;
  const mine = g.members.find((m) => m.id === me);
  if (!mine) {
    console.error(`throughput-share.mjs: ${me} is no longer a member of ${group} (its lease ended?)`);
    process.exit(1);
  }
  if (mine.share === share) continue;
  share = mine.share;
  console.log(`share ${share} version ${g.version}`);
  if (++printed === maxEvents) process.exit(0);
}
