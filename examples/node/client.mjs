// @ts-check
// The typed coord-sidecar client the Node examples share: openapi-fetch over the
// types that openapi-typescript generates from openapi.yaml (api.d.ts, made by
// `npm run generate`). `npm run check` (tsc) checks every example against them, so
// a change of the contract that breaks a client breaks the build.
//
// Setup, once: `npm ci --omit=dev` in this folder (openapi-fetch, ~6 KB, no other
// dependency); `npm ci` also brings the generator and tsc.
import createClient from "openapi-fetch";

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

/**
 * client is the typed client, e.g.
 * client.POST("/v1/locks/{name}", { params: { path: { name }, query: { wait: "10s" } } }):
 * paths, parameters, bodies and answers are checked against openapi.yaml.
 */
export const client = /** @type {typeof createClient<paths>} */ (createClient)({ baseUrl: sidecarURL() });

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
    const problem = error === undefined ? "" : ` ${JSON.stringify(error)}`;
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
 * events opens one of the sidecar's event streams through the typed client and
 * yields each server-sent event as {id, event, data}, typed by the stream's schema.
 * @template {keyof Streams} P
 * @param {P} path
 * @param {Record<string, string>} pathParams
 * @returns {AsyncGenerator<Streams[P]>}
 */
export async function* events(path, pathParams) {
  const answer = await /** @type {any} */ (client).GET(path, { params: { path: pathParams }, parseAs: "stream" });
  const body = /** @type {ReadableStream<Uint8Array>} */ (ok(answer));
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
        if (data.length) yield /** @type {Streams[P]} */ ({ id, event, data: JSON.parse(data.join("\n")) });
        event = "";
        data = [];
      }
    }
  }
}
