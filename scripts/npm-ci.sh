#!/usr/bin/env bash
# Installs the npm packages pinned in DIR/package-lock.json into DIR/node_modules
# (git-ignored), a directory of the clone's own.
#
# An install is checked, not trusted: scripts/npm-check.mjs verifies that every
# package the lock file lists is there at its pinned version. DIR/node_modules
# passing the check is left alone (whoever installed it: this script, or a user's
# own `npm ci`). Otherwise it is replaced by a copy of the machine's store
# ${COORD_NPM_STORE:-${XDG_CACHE_HOME:-~/.cache}/coord-sidecar/npm}/<sha256 of the lock file>/node_modules,
# installed there once with `npm ci` and checked too before each copy: a store
# damaged or emptied (its .complete mark notwithstanding) is installed again. A
# fresh clone costs a copy, not an install, and an edited lock file gets a store
# of its own. The copy is a real copy: nothing run in one clone's node_modules
# (an `npm ci`, an edit) writes into the store or another clone's packages. A
# node_modules that is a link (this script's former layout: a link into the
# store) is replaced by a copy. Concurrent runs (go test runs packages in
# parallel; several clones) take turns on DIR/.npm-ci.lock and on the store's
# lock.
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
check="$PWD/scripts/npm-check.mjs"
store_root="${COORD_NPM_STORE:-${XDG_CACHE_HOME:-$HOME/.cache}/coord-sidecar/npm}"
mkdir -p "$store_root"
for dir in "$@"; do
	(
		exec 9>"$dir/.npm-ci.lock"
		flock 9
		if [ -L "$dir/node_modules" ]; then
			rm -f "$dir/node_modules" # the link, never what it points to
		fi
		if node "$check" "$dir" 2>/dev/null; then
			exit 0
		fi
		want="$(sha256sum <"$dir/package-lock.json" | cut -d' ' -f1)"
		store="$store_root/$want"
		tmp="$(mktemp -d "$dir/.node_modules.XXXXXX")"
		trap 'rm -rf "$tmp"' EXIT
		(
			exec 8>"$store.lock"
			flock 8
			if [ ! -f "$store/.complete" ] || ! node "$check" "$dir" "$store" 2>/dev/null; then
				if [ -f "$store/.complete" ]; then
					echo "npm-ci.sh: the store $store is damaged (marked complete, but:" \
						"$(node "$check" "$dir" "$store" 2>&1 || true)); installing it again" >&2
				fi
				echo "npm-ci.sh: installing the packages of $dir/package-lock.json into $store" >&2
				rm -rf "$store"
				mkdir -p "$store"
				cp "$dir/package.json" "$dir/package-lock.json" "$store/"
				(cd "$store" && npm ci --no-audit --no-fund --loglevel=error)
				node "$check" "$dir" "$store"
				touch "$store/.complete" # only a whole, checked install counts
			fi
			# Copied while the store's lock is held: nobody installs it again meanwhile.
			cp -a "$store/node_modules" "$tmp/"
		)
		rm -rf "$dir/node_modules"
		mv "$tmp/node_modules" "$dir/node_modules"
		node "$check" "$dir"
	)
done
