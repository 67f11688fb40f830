// @ts-check
// The typed coord-sidecar client the Node examples share: openapi-fetch over the
// types that openapi-typescript generates from openapi.yaml (api.d.ts, made by
// `npm run generate`). `npm run check` (tsc) checks every example against them, so
// a change of the contract that breaks a client breaks the build.
//
// Setup, once: `npm ci --omit=dev` in this folder (openapi-fetch, ~6 KB, no other
// dependency); `npm ci` also brings the generator and tsc.
//
// 64-bit integers are exact: answers, problem documents and events are parsed by
// json.mjs (an integer past 2^53 is a BigInt), bodies are written by it (a BigInt
// goes out as its digits), and api.d.ts types `format: int64` as `number | bigint`.
import createClient from "openapi-fetch";
import { parse, stringify } from "./json.mjs";

/** @typedef {import("./api.js").paths} paths */
/** @typedef {import("./api.js").components["schemas"]} schemas */

/**
 * sidecarURL reads COORD_ADDR: a URL (http://127.0.0.1:8080) or, as the
 * command-line subcommands take it, host:port (127.0.0.1:8080, localhost:8080,
 * [::1]:8080). Default http://127.0.0.1:8080.
 * @param {string | undefined} addr
 * @returns {string}
 */
export function sidecarURL(addr = process.env.COORD_ADDR) {
  if (!addr) return "http://127.0.0.1:8080";
  const url = new URL(/^[a-z][a-z0-9+.-]*:\/\//i.test(addr) ? addr : `http://${addr}`);
  return url.href.replace(/\/+$/, "");
}

/** The exact parse of each JSON answer, by its Response (see exactFetch). */
const exactBodies = new WeakMap();

/**
 * exactFetch is fetch, except that a JSON answer (a body or a problem document)
 * is read here and parsed exactly; openapi-fetch's own parse (JSON.parse) still
 * runs on the same text, and exact() puts this one in its place.
 * @param {Request} request
 * @returns {Promise<Response>}
 */
async function exactFetch(request) {
  const response = await fetch(request);
  if (!/^application\/(problem\+)?json\b/.test(response.headers.get("Content-Type") ?? "")) return response;
  const text = await response.text();
  const body = text ? parse(text) : undefined;
  exactBodies.set(response, body);
  Object.assign(response, { text: async () => text, json: async () => body });
  return response;
}

/**
 * exact puts the exact parse of an answer's JSON in its data or error.
 * @template {{data?: unknown, error?: unknown, response: Response}} A
 * @param {A} answer
 * @returns {A}
 */
function exact(answer) {
  if (exactBodies.has(answer.response)) {
    const body = exactBodies.get(answer.response);
    if (answer.response.ok) answer.data = body;
    else answer.error = body;
  }
  return answer;
}

/**
 * client is the typed client, e.g.
 * client.POST("/v1/locks/{name}", { params: { path: { name }, query: { wait: "10s" } } }):
 * paths, parameters, bodies and answers are checked against openapi.yaml.
 */
export const client = /** @type {typeof createClient<paths>} */ (createClient)({
  baseUrl: sidecarURL(),
  fetch: exactFetch,
  bodySerializer: (body) => stringify(body),
});
for (const method of /** @type {const} */ (["GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"])) {
  const call = /** @type {any} */ (client)[method];
  /** @type {any} */ (client)[method] = async (/** @type {any[]} */ ...args) => exact(await call(...args));
}

/**
 * ok returns a successful answer's data (undefined for 204), or throws with the
 * request, the HTTP status and the problem document the sidecar answered
 * (RFC 9457: type, title, status, detail and the problem's own fields).
 * @template T
 * @param {{data?: T, error?: unknown, response: Response}} answer
 * @returns {T}
 */
export function ok({ data, error, response }) {
  if (!response.ok) {
    const problem = error === undefined ? "" : ` ${stringify(error)}`;
    throw new Error(`${new URL(response.url).pathname}: ${response.status}${problem}`);
  }
  return /** @type {T} */ (data);
}

/**
 * message is what went wrong, for a line on stderr.
 * @param {unknown} err
 */
export function message(err) {
  return err instanceof Error ? err.message : String(err);
}

/**
 * The event streams and the events each sends, from openapi.yaml.
 * @typedef {{
 *   "/v1/leases/{lease}/events": schemas["LeaseStreamEvent"],
 *   "/v1/elections/{name}/events": schemas["ElectionEvent"],
 *   "/v1/throughput/{group}/events": schemas["ThroughputEvent"] | schemas["ThroughputLeaderEvent"],
 *   "/v1/session/events": schemas["SessionEvent"],
 *   "/v1/events": schemas["OverviewEvent"],
 * }} Streams
 */

/**
 * events follows one of the sidecar's event streams through the typed client and
 * yields each server-sent event as {id, event, data}, typed by the stream's schema.
 * A stream that ends or breaks (a restart of the sidecar: the connection refused
 * or cut, 5xx, 429) is opened again, with Last-Event-ID, after 50 ms doubling to
 * 1 s; it starts again with the state now, so a state may come twice. Any other
 * answer (404: what the path names is gone) throws, as does a sidecar not reached
 * for giveUp seconds (default: tried for ever).
 * @template {keyof Streams} P
 * @param {P} path
 * @param {Record<string, string>} pathParams
 * @param {number} [giveUp]
 * @returns {AsyncGenerator<Streams[P]>}
 */
export async function* events(path, pathParams, giveUp = Infinity) {
  let lastId = "", pause = 50, broke = 0;
  for (;;) {
    let answer;
    try {
      answer = await /** @type {any} */ (client).GET(path, {
        params: { path: pathParams },
        headers: lastId ? { "Last-Event-ID": lastId } : {},
        parseAs: "stream",
      });
    } catch {
      answer = undefined; // not reached: the sidecar is restarting
    }
    const status = answer?.response.status ?? 0;
    if (answer && !answer.response.ok && status < 500 && status !== 429) ok(answer); // throws
    if (answer?.response.ok) {
      pause = 50;
      broke = 0;
      try {
        for await (const ev of parseEvents(ok(answer))) {
          if (ev.id) lastId = ev.id;
          yield /** @type {Streams[P]} */ (ev);
        }
      } catch {
        // cut short: the sidecar is restarting
      }
    }
    broke ||= Date.now();
    if (Date.now() - broke > giveUp * 1000) throw new Error(`${path}: the sidecar was not reached for ${giveUp}s`);
    await new Promise((resolve) => setTimeout(resolve, pause));
    pause = Math.min(pause * 2, 1000);
  }
}

/**
 * parseEvents yields each server-sent event of a response body as {id, event, data}.
 * @param {ReadableStream<Uint8Array>} body
 * @returns {AsyncGenerator<{id: string, event: string, data: any}>}
 */
async function* parseEvents(body) {
  const decoder = new TextDecoder();
  let buf = "", id = "", event = "", data = /** @type {string[]} */ ([]);
  for await (const chunk of /** @type {AsyncIterable<Uint8Array>} */ (/** @type {unknown} */ (body))) {
    buf += decoder.decode(chunk, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line.startsWith("id:")) id = line.slice(3).trim();
      else if (line.startsWith("event:")) event = line.slice(6).trim();
      else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      else if (line === "") {
        // a blank line ends an event; ":" lines are comments
        if (data.length) yield { id, event, data: parse(data.join("\n")) };
        event = "";
        data = [];
      }
    }
  }
}
