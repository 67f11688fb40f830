// Generates api.d.ts, the typed client's types, from ../../openapi.yaml:
// openapi-typescript as its command line would, except that a signed 64-bit
// integer (`format: int64`: counter values, fencing tokens, terms, versions)
// is `number | bigint`, what the client's parse gives it (json.mjs): a number
// while it is a safe integer, a BigInt past 2^53, exact either way.
//
//   node generate.mjs [output]     (default api.d.ts; `make generate` runs it)
import fs from "node:fs";
import ts from "typescript";
import openapiTS, { astToString, COMMENT_HEADER, NULL, NUMBER } from "openapi-typescript";

const BIGINT = ts.factory.createKeywordTypeNode(ts.SyntaxKind.BigIntKeyword);

const out = process.argv[2] ?? "api.d.ts";
const ast = await openapiTS(new URL("../../openapi.yaml", import.meta.url), {
  silent: true,
  transform(schema) {
    if (schema.type !== "integer" || schema.format !== "int64") return undefined;
    return ts.factory.createUnionTypeNode(schema.nullable ? [NUMBER, BIGINT, NULL] : [NUMBER, BIGINT]);
  },
});
fs.writeFileSync(out, COMMENT_HEADER + astToString(ast), "utf8");
