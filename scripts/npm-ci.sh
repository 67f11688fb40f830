#!/usr/bin/env bash
# Installs the npm packages pinned in DIR/package-lock.json into DIR/node_modules
# (git-ignored), once per version of the lock file: `npm ci`, then a stamp with the
# lock file's hash, so later runs cost nothing. Concurrent runs (go test runs
# packages in parallel) take turns on DIR/.npm-ci.lock.
#
#   scripts/npm-ci.sh tools examples/node
#
# Needs node and npm (scripts/deps.sh installs them); the packages come from the
# npm registry.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
for tool in node npm flock sha256sum; do
	command -v "$tool" >/dev/null || { echo "npm-ci.sh: $tool is not on PATH (scripts/deps.sh test installs it)" >&2; exit 1; }
done
for dir in "$@"; do
	(
		exec 9>"$dir/.npm-ci.lock"
		flock 9
		want="$(sha256sum <"$dir/package-lock.json")"
		if [ "$(cat "$dir/node_modules/.lock-sha256" 2>/dev/null)" != "$want" ]; then
			echo "npm-ci.sh: installing the packages of $dir/package-lock.json" >&2
			(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
			printf '%s\n' "$want" >"$dir/node_modules/.lock-sha256"
		fi
	)
done
