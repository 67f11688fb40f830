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
//    keep the lease alive every TTL/3 seconds; if that fails the lock is no longer
//    ours: stop the work. Ctrl-C reaches the work too; the release follows.
const [program = "sh", ...programArgs] = command;
const work = spawn(program, programArgs, {
  stdio: "inherit",
  env: { ...process.env, FENCING_TOKEN: String(token) },
});
const keepalive = setInterval(() => {
  client
    .POST("/v1/leases/{lease}/keepalive", { params: { path: { lease } } })
    .then(ok)
    .catch((err) => {
      console.error(`lock.mjs: lease lost (${message(err)}); stopping the work`);
      work.kill();
    });
}, (ttl / 3) * 1000);
process.on("SIGINT", () => {}); // wait for the work to end, then release
const status = await new Promise((resolve) => {
  work.on("exit", (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  work.on("error", (err) => {
    console.error(`lock.mjs: ${err.message}`);
    resolve(127);
  });
});
clearInterval(keepalive);

// 3. Release (204): the implicit lease ends with it.
try {
  ok(await client.DELETE("/v1/locks/{name}", { params: { path: { name: lock }, query: { lease } } }));
  console.log("released");
} catch (err) {
  console.error(`lock.mjs: ${message(err)}`);
  process.exit(1);
}
process.exit(status);
