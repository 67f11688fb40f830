#!/usr/bin/env node
// Run a command while holding a coord-sidecar lock, with the lock's fencing token.
//
//   node lock.mjs LOCK [COMMAND [ARG]...]
//
// Takes LOCK (waiting up to $WAIT for it), prints "token N", runs COMMAND with
// FENCING_TOKEN=N in its environment while keeping the lock's lease alive, then
// releases the lock and prints "released". Exits with COMMAND's status, or 1 when
// the lock could not be taken. Without COMMAND it prints a line and sleeps 2s.
//
// Environment: COORD_ADDR (default http://127.0.0.1:8080), WAIT (10s), TTL (the
// lease's time to live in seconds, at least 3; default 30), OWNER (shown as the
// lock's holder; default host:pid). Node 18+ standard library only (global fetch).
import { spawn } from "node:child_process";
import { constants, hostname } from "node:os";

const addr = process.env.COORD_ADDR ?? "http://127.0.0.1:8080";
const [lock, ...args] = process.argv.slice(2);
if (!lock) {
  console.error("usage: node lock.mjs LOCK [COMMAND [ARG]...]");
  process.exit(2);
}
const command = args.length ? args : ["sh", "-c", 'echo "working with fencing token $FENCING_TOKEN"; sleep 2'];
const ttl = Number(process.env.TTL ?? 30);

// call sends one request and returns the decoded JSON answer (null when empty);
// an HTTP error throws with the problem document.
async function call(method, path) {
  const res = await fetch(addr + path, { method });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// 1. Acquire. Without lease= the sidecar makes an implicit lease from ttl=, which
//    ends with the release. The answer (201) is
//    {"acquiredAt","fencingToken","lease","name","owner"}; a refusal is a problem
//    document (409 lock-held after WAIT, for one).
const query = new URLSearchParams({
  wait: process.env.WAIT ?? "10s",
  ttl: `${ttl}s`,
  owner: process.env.OWNER ?? `${hostname()}:${process.pid}`,
});
let grant;
try {
  grant = await call("POST", `/v1/locks/${lock}?${query}`);
} catch (err) {
  console.error(`lock.mjs: could not take ${lock}: ${err.message}`);
  process.exit(1);
}
// fencingToken is a zxid: an int64 that JSON.parse reads exactly up to 2^53.
const { lease, fencingToken: token } = grant;
console.log(`token ${token}`);

// 2. Work, with the token in the environment: pass it to whatever the lock
//    protects, which refuses tokens lower than the highest it has seen. Meanwhile
//    keep the lease alive every TTL/3 seconds; if that fails the lock is no longer
//    ours: stop the work. Ctrl-C reaches the work too; the release follows.
const work = spawn(command[0], command.slice(1), {
  stdio: "inherit",
  env: { ...process.env, FENCING_TOKEN: String(token) },
});
const keepalive = setInterval(() => {
  call("POST", `/v1/leases/${lease}/keepalive`).catch((err) => {
    console.error(`lock.mjs: lease lost (${err.message}); stopping the work`);
    work.kill();
  });
}, (ttl / 3) * 1000);
process.on("SIGINT", () => {}); // wait for the work to end, then release
const status = await new Promise((resolve) => {
  work.on("exit", (code, signal) => resolve(code ?? 128 + constants.signals[signal]));
  work.on("error", (err) => {
    console.error(`lock.mjs: ${err.message}`);
    resolve(127);
  });
});
clearInterval(keepalive);

// 3. Release: the implicit lease ends with it.
try {
  await call("DELETE", `/v1/locks/${lock}?lease=${lease}`);
  console.log("released");
} catch (err) {
  console.error(`lock.mjs: ${err.message}`);
  process.exit(1);
}
process.exit(status);
