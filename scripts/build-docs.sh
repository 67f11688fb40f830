#!/usr/bin/env bash
# Builds the HTTP reference that GET /docs/ serves from openapi.yaml: Redoc's
# page as one HTML file, made by `redocly build-docs` (tools/package-lock.json
# pins it). --inlineBundle puts Redoc's script into the page: without it the
# page loads Redoc from Redocly's CDN, and the reference would not work offline.
#
#   scripts/build-docs.sh [OUT]    (OUT defaults to api/docs/index.html)
#
# make generate runs it; api's TestDocsPageIsFresh runs it into a temporary file
# and compares. It fails when the page would load a script or a style sheet
# from anywhere (a <script src> or <link href>) or Redocly's logo, or would send
# Redoc's telemetry: the page must stand alone.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/api/docs/index.html}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
cd "$root"
scripts/npm-ci.sh tools
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
# redocly prints banners and progress; they are shown only when it fails.
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
if ! tools/node_modules/.bin/redocly build-docs openapi.yaml --inlineBundle \
	--title "coord-sidecar HTTP reference" --output "$out" >"$log" 2>&1; then
	cat "$log" >&2
	exit 1
fi
# Redoc's "API docs by Redocly" credit shows Redocly's logo from their CDN; the
# page shows the name as an inline image instead (the credit and its link stay).
logo='data:image/svg+xml,%3Csvg%20xmlns%3D%22http%3A%2F%2Fwww.w3.org%2F2000%2Fsvg%22%20width%3D%2256%22%20height%3D%2216%22%3E%3Ctext%20x%3D%220%22%20y%3D%2213%22%20font-family%3D%22sans-serif%22%20font-size%3D%2213%22%20fill%3D%22%23888%22%3ERedocly%3C%2Ftext%3E%3C%2Fsvg%3E'
sed -i -E "s|https://cdn\.redoc\.ly/redoc/logo-mini(-full)?\.svg|$logo|g" "$out"
if grep -q 'cdn\.redoc\.ly' "$out"; then
	echo "build-docs.sh: $out still loads something from cdn.redoc.ly; the reference must load nothing from elsewhere" >&2
	exit 1
fi
if ! grep -q '"disableTelemetry":true' "$out"; then
	echo "build-docs.sh: $out does not turn Redoc's telemetry off" >&2
	exit 1
fi
if grep -Eq '<script[^>]*[[:space:]]src=|<link[^>]*[[:space:]]href=' "$out"; then
	echo "build-docs.sh: $out loads a script or a style sheet from elsewhere; the reference must be one self-contained page (--inlineBundle)" >&2
	exit 1
fi
