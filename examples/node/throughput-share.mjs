#!/usr/bin/env node
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
// Environment: COORD_ADDR (default http://127.0.0.1:8080), WEIGHT (default 1), TTL
// (seconds, default 10), EVENTS, TIMEOUT. Node 18+ standard library only (global
// fetch).
const addr = process.env.COORD_ADDR ?? "http://127.0.0.1:8080";
const [group, me = `member-${process.pid}`] = process.argv.slice(2);
if (!group) {
  console.error("usage: node throughput-share.mjs GROUP [ID]");
  process.exit(2);
}
const maxEvents = Number(process.env.EVENTS ?? 0);
const timeout = Number(process.env.TIMEOUT ?? 0);
if (timeout > 0) setTimeout(() => process.exit(0), timeout * 1000);

// call sends one request and returns the decoded JSON answer; an HTTP error
// throws with the problem document.
async function call(method, path) {
  const res = await fetch(addr + path, { method });
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

// 1. Join. The answer (201) is {"group","id","lease","share","version"}.
const query = new URLSearchParams({ id: me, weight: process.env.WEIGHT ?? "1", ttl: `${process.env.TTL ?? 10}s` });
let joined;
try {
  joined = await call("POST", `/v1/throughput/${group}/members?${query}`);
} catch (err) {
  console.error(`throughput-share.mjs: could not join: ${err.message}`);
  process.exit(1);
}
let share = joined.share, printed = 1;
console.log(`joined ${me}\nshare ${share} version ${joined.version}`);
if (printed === maxEvents) process.exit(0);

// 2. Keep the membership's lease alive by holding its event stream open: the lease
//    does not expire while the stream is open, and is revoked when it closes (when
//    this process exits). The stream's last event says how the lease ended.
(async () => {
  let last;
  for await (const { event } of events(`/v1/leases/${joined.lease}/events`)) last = event;
  throw new Error(`the lease ended (${last})`);
})().catch((err) => {
  console.error(`throughput-share.mjs: ${err.message}`);
  process.exit(1);
});

// 3. Follow the group: `throughput` events (data: the group, as GET
//    /v1/throughput/GROUP answers it), the current allocation first, then every new
//    one; `leader` events (a new computing member) do not matter here.
for await (const { event, data: g } of events(`/v1/throughput/${group}/events`)) {
  if (event !== "throughput" || g.version < joined.version) continue;
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
console.error("throughput-share.mjs: the event stream ended");
process.exit(1);
