#!/usr/bin/env node
// @ts-check
// Run a command while holding a coord-sidecar lock, with the lock's fencing token.
//
//   node lock.mjs LOCK [COMMAND [ARG]...]
//
// Takes LOCK (waiting up to $WAIT for it), prints "token N", runs COMMAND with
// FENCING_TOKEN=N in its environment while keeping the lock's lease alive, then
// releases the lock and prints "released". Exits with COMMAND's status, or 1 when
// the lock could not be taken. Without COMMAND it prints a line and sleeps 2s.
//
// A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
// --state-dir) costs nothing: a keepalive that finds the sidecar away is tried
// again after 50 ms doubling to 1 s. COMMAND is stopped only when the sidecar says
// the lease is gone (404), or when no keepalive was answered for as long as the
// lease could outlive it: TTL, or half the sidecar's ZooKeeper session timeout (a
// sidecar gone for good lets its session, and the lock, expire then).
//
// Environment: COORD_ADDR (a URL or host:port; default http://127.0.0.1:8080),
// WAIT (10s), TTL (the lease's time to live in seconds, at least 3; default 30),
// OWNER (shown as the lock's holder; default host:pid). Talks to the sidecar
// through the typed client of client.mjs (run `npm ci --omit=dev` here once).
import { spawn } from "node:child_process";
import { constants, hostname } from "node:os";
import { client, message, ok } from "./client.mjs";

const [lock, ...args] = process.argv.slice(2);
if (!lock) {
  console.error("usage: node lock.mjs LOCK [COMMAND [ARG]...]");
  process.exit(2);
}
const command = args.length ? args : ["sh", "-c", 'echo "working with fencing token $FENCING_TOKEN"; sleep 2'];
const ttl = Number(process.env.TTL ?? 30);

/**
 * vouched is how long an answered keepalive vouches for the lease: TTL, or half
 * the sidecar's ZooKeeper session timeout if that is shorter (seconds).
 * @param {number} ttl
 */
async function vouched(ttl) {
  const { timeout = "" } = ok(await client.GET("/v1/session", {})); // a Go duration: "10s", "1m30s"
  /** @type {Record<string, number>} */
  const units = { h: 3600, m: 60, s: 1, ms: 1e-3, us: 1e-6, "µs": 1e-6, ns: 1e-9 };
  let seconds = 0;
  for (const [, n, unit] of timeout.matchAll(/(\d+(?:\.\d+)?)(h|ms|m|s|us|µs|ns)/g)) seconds += Number(n) * units[unit];
  return seconds > 0 ? Math.min(ttl, seconds / 2) : ttl;
}

/**
 * keepAlive keeps the lease alive, three keepalives per period (seconds), until
 * the function it returns is called. A keepalive the sidecar does not answer
 * (restarting: refused, cut, 5xx) is tried again after 50 ms doubling to 1 s. The
 * work is stopped when the sidecar answers that the lease is gone, or when no
 * keepalive was answered for period since the last answered one was sent (the
 * lease may have expired then).
 * @param {string} lease
 * @param {number} period
 * @param {import("node:child_process").ChildProcess} work
 */
function keepAlive(lease, period, work) {
  let confirmed = Date.now(), backoff = 0, stopped = false;
  /** @type {NodeJS.Timeout | undefined} */
  let timer;
  /** @param {string} why */
  const lost = (why) => {
    console.error(`lock.mjs: lease lost (${why}); stopping the work`);
    work.kill();
  };
  const next = () => {
    const left = confirmed + period * 1000 - Date.now();
    if (left <= 0) return lost(`no keepalive answered for ${period}s`);
    timer = setTimeout(beat, Math.min(backoff || (period * 1000) / 3, left));
  };
  const beat = async () => {
    const sent = Date.now();
    let status = 0;
    try {
      const answer = await client.POST("/v1/leases/{lease}/keepalive", { params: { path: { lease } }, signal: AbortSignal.timeout(5000) });
      status = answer.response.status;
    } catch {
      // not reached: the sidecar is restarting
    }
    if (stopped) return;
    if (status === 200) [confirmed, backoff] = [sent, 0];
    else if (status && status < 500 && status !== 429) return lost(`keepalive answered ${status}`);
    else backoff = backoff ? Math.min(backoff * 2, 1000) : 50;
    next();
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

// How long an answered keepalive vouches for the lease (see keepAlive).
let period;
try {
  period = await vouched(ttl);
} catch (err) {
  console.error(`lock.mjs: ${message(err)}`);
  process.exit(1);
}

// 1. Acquire. Without lease= the sidecar makes an implicit lease from ttl=, which
//    ends with the release. The answer (201) is a LockGrant:
//    {"acquiredAt","fencingToken","lease","name","owner"}; a refusal is a problem
//    document (409 lock-held after WAIT, for one).
let grant;
try {
  grant = ok(
    await client.POST("/v1/locks/{name}", {
      params: {
        path: { name: lock },
        query: { wait: process.env.WAIT ?? "10s", ttl: `${ttl}s`, owner: process.env.OWNER ?? `${hostname()}:${process.pid}` },
      },
    }),
  );
} catch (err) {
  console.error(`lock.mjs: could not take ${lock}: ${message(err)}`);
  process.exit(1);
}
// fencingToken is a zxid: an int64 that JSON.parse reads exactly up to 2^53.
const { lease, fencingToken: token } = grant;
console.log(`token ${token}`);

// 2. Work, with the token in the environment: pass it to whatever the lock
//    protects, which refuses tokens lower than the highest it has seen. Meanwhile
//    keep the lease alive (keepAlive); once the lock may no longer be ours, stop
//    the work. Ctrl-C reaches the work too; the release follows.
const [program = "sh", ...programArgs] = command;
const work = spawn(program, programArgs, {
  stdio: "inherit",
  env: { ...process.env, FENCING_TOKEN: String(token) },
});
const stopKeeping = keepAlive(lease, period, work);
process.on("SIGINT", () => {}); // wait for the work to end, then release
const status = await new Promise((resolve) => {
  work.on("exit", (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  work.on("error", (err) => {
    console.error(`lock.mjs: ${err.message}`);
    resolve(127);
  });
});
stopKeeping();

// 3. Release (204): the implicit lease ends with it. Tried again for up to 10 s
//    while the sidecar restarts (not reached, 5xx).
for (let pause = 50, deadline = Date.now() + 10_000; ; pause = Math.min(pause * 2, 1000)) {
  try {
    const answer = await client.DELETE("/v1/locks/{name}", { params: { path: { name: lock }, query: { lease } } });
    if (answer.response.status < 500 || Date.now() > deadline) {
      ok(answer);
      console.log("released");
      break;
    }
  } catch (err) {
    if (Date.now() > deadline || !(err instanceof TypeError)) {
      console.error(`lock.mjs: ${message(err)}`);
      process.exit(1);
    }
  }
  await new Promise((resolve) => setTimeout(resolve, pause));
}
process.exit(status);
