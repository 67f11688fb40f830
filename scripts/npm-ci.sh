#!/usr/bin/env bash
# Installs the npm packages pinned in DIR/package-lock.json for DIR/node_modules
# (git-ignored). They are installed once per machine and version of the lock
# file, with `npm ci`, into the store
# ${COORD_NPM_STORE:-${XDG_CACHE_HOME:-~/.cache}/coord-sidecar/npm}/<sha256 of the lock file>/,
# and DIR/node_modules is a link to the store's: a fresh clone costs a link, not
# an install, and an edited lock file gets a store of its own. Concurrent runs
# (go test runs packages in parallel; several clones) take turns on
# DIR/.npm-ci.lock and on the store's lock.
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
store_root="${COORD_NPM_STORE:-${XDG_CACHE_HOME:-$HOME/.cache}/coord-sidecar/npm}"
mkdir -p "$store_root"
for dir in "$@"; do
	(
		exec 9>"$dir/.npm-ci.lock"
		flock 9
		want="$(sha256sum <"$dir/package-lock.json" | cut -d' ' -f1)"
		store="$store_root/$want"
		(
			exec 8>"$store.lock"
			flock 8
			if [ ! -f "$store/.complete" ]; then
				echo "npm-ci.sh: installing the packages of $dir/package-lock.json into $store" >&2
				rm -rf "$store"
				mkdir -p "$store"
				cp "$dir/package.json" "$dir/package-lock.json" "$store/"
				(cd "$store" && npm ci --no-audit --no-fund --loglevel=error)
				touch "$store/.complete" # only a whole install counts
			fi
		)
		if [ "$(readlink "$dir/node_modules" 2>/dev/null)" != "$store/node_modules" ]; then
			rm -rf "$dir/node_modules"
			ln -s "$store/node_modules" "$dir/node_modules"
		fi
	)
done
