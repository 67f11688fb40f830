// @ts-check
// JSON with exact 64-bit integers. The sidecar's counter values, fencing tokens,
// terms and versions are signed 64-bit; JSON.parse turns every number into a
// double, so 9223372036854775804 would come back as 9223372036854776000.
// parse gives an integer past Number's safe range (±(2^53−1)) as a BigInt with
// every digit and any other number as JSON.parse does; stringify writes a BigInt
// as its digits (JSON.stringify throws on one). The types generated from
// openapi.yaml say so: `format: int64` is `number | bigint` (generate.mjs).
// String(v) prints either exactly; BigInt(v) gives one type to compute with.

const ATOM = /-?(?:0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?|true|false|null/y;

/**
 * parse is JSON.parse, with integers past 2^53 as BigInt. Text without a run of
 * 16 digits (the shortest unsafe integer has 16) goes to JSON.parse as it is.
 * @param {string} text
 * @returns {any}
 */
export function parse(text) {
  if (!/\d{16}/.test(text)) return JSON.parse(text);
  let i = 0;
  const fail = () => {
    throw new SyntaxError(`JSON: unexpected input at ${i}`);
  };
  const space = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  const string = () => {
    let j = i + 1; // JSON.parse reads the string's escapes
    while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
    if (j >= text.length) fail();
    const s = JSON.parse(text.slice(i, j + 1));
    i = j + 1;
    return s;
  };
  /** @returns {any} */
  const value = () => {
    space();
    const c = text[i];
    if (c === '"') return string();
    if (c === "{" || c === "[") {
      const obj = c === "{", close = obj ? "}" : "]";
      /** @type {any} */
      const out = obj ? {} : [];
      i++;
      space();
      if (text[i] === close) {
        i++;
        return out;
      }
      for (;;) {
        space();
        if (obj) {
          if (text[i] !== '"') fail();
          const k = string();
          space();
          if (text[i++] !== ":") fail();
          Object.defineProperty(out, k, { value: value(), enumerable: true, writable: true, configurable: true });
        } else {
          out.push(value());
        }
        space();
        const next = text[i++];
        if (next === close) return out;
        if (next !== ",") fail();
      }
    }
    ATOM.lastIndex = i;
    const m = ATOM.exec(text);
    if (!m) return fail();
    i = ATOM.lastIndex;
    if (m[0] === "true") return true;
    if (m[0] === "false") return false;
    if (m[0] === "null") return null;
    const n = Number(m[0]);
    return m[1] === undefined && m[2] === undefined && !Number.isSafeInteger(n) ? BigInt(m[0]) : n;
  };
  const v = value();
  space();
  if (i !== text.length) fail();
  return v;
}

/**
 * stringify is JSON.stringify, with a BigInt written as its digits.
 * @param {unknown} v
 * @returns {string}
 */
export function stringify(v) {
  if (typeof v === "bigint") return v.toString();
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined || typeof x === "function" ? "null" : stringify(x))).join(",")}]`;
  if (v !== null && typeof v === "object" && typeof (/** @type {any} */ (v).toJSON) !== "function") {
    const fields = Object.entries(v).filter(([, x]) => x !== undefined && typeof x !== "function");
    return `{${fields.map(([k, x]) => `${JSON.stringify(k)}:${stringify(x)}`).join(",")}}`;
  }
  return JSON.stringify(v);
}
