#!/usr/bin/env node
// @ts-check
// Read, add to, set or delete a coord-sidecar counter; values are exact past 2^53.
//
//   node counter.mjs NAME                 prints the value (0 when never set)
//   node counter.mjs NAME add N           adds N (may be negative), prints the value after
//   node counter.mjs NAME set N [EXPECT]  sets N (if the value is EXPECT), prints it
//   node counter.mjs NAME delete          removes the counter, prints "deleted"
//
// N is a signed 64-bit integer; it goes out and comes back as a BigInt when past
// 2^53 (json.mjs). A refusal (409 value-mismatch, counter-overflow, 404) goes to
// stderr with the problem document, exit status 1; a bad command line, 2.
// Environment: COORD_ADDR (a URL or host:port; default http://127.0.0.1:8080).
import { client, message, ok } from "./client.mjs";

const [name, verb = "get", n, expect] = process.argv.slice(2);
/** @param {string | undefined} s */
const int64 = (s) => {
  if (s === undefined || !/^-?\d+$/.test(s)) usage();
  const v = BigInt(/** @type {string} */ (s));
  return Number.isSafeInteger(Number(v)) ? Number(v) : v;
};
function usage() {
  console.error("usage: node counter.mjs NAME [add N | set N [EXPECT] | delete]");
  process.exit(2);
}
if (!name) usage();
const path = { name: /** @type {string} */ (name) };

try {
  switch (verb) {
    case "get":
      console.log(String(ok(await client.GET("/v1/counters/{name}", { params: { path } })).value));
      break;
    case "add":
      console.log(String(ok(await client.POST("/v1/counters/{name}", { params: { path, query: { add: int64(n) } } })).value));
      break;
    case "set": {
      const query = expect === undefined ? {} : { expect: int64(expect) };
      console.log(String(ok(await client.PUT("/v1/counters/{name}", { params: { path, query }, body: { value: int64(n) } })).value));
      break;
    }
    case "delete":
      ok(await client.DELETE("/v1/counters/{name}", { params: { path } }));
      console.log("deleted");
      break;
    default:
      usage();
  }
} catch (err) {
  console.error(`counter.mjs: ${message(err)}`);
  process.exit(1);
}
