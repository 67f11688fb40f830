#!/usr/bin/env bash
# Installs what the test suite needs beyond Go and ZooKeeper, from Debian's
# packages, when it is missing: Chromium (the status page is tested in a real
# headless browser), curl (the shell examples and the README's sessions), python3
# and node (the examples in those languages run in the suite too), npm (the
# contract tools of tools/ and the Node client of examples/node: scripts/npm-ci.sh),
# jq (`make demo`, which a test runs), systemd's systemd-analyze (deploy/'s test
# verifies the systemd unit with it; nothing is started), Curator's
# ServiceDiscovery and recipes (libcurator-discovery-java,
# libcurator-recipes-java: the interop tests of api/services and api/locks run
# them as peers, from their Java sources, which needs a JDK's compiler:
# default-jdk-headless), and kazoo (python3-kazoo: api/kv's interop test reads
# and writes the key tree with it, under Debian's /usr/bin/python3).
#
#   scripts/deps.sh test
set -euo pipefail

need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v curl >/dev/null 2>&1 || need+=(curl)
command -v python3 >/dev/null 2>&1 || need+=(python3)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v jq >/dev/null 2>&1 || need+=(jq)
command -v npm >/dev/null 2>&1 || need+=(npm)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
[ -e /usr/share/java/curator-x-discovery.jar ] || need+=(libcurator-discovery-java)
[ -e /usr/share/java/curator-recipes.jar ] || need+=(libcurator-recipes-java)
java --list-modules 2>/dev/null | grep -q '^jdk.compiler' || need+=(default-jdk-headless)
/usr/bin/python3 -c 'import kazoo' >/dev/null 2>&1 || need+=(python3-kazoo)
[ ${#need[@]} -eq 0 ] && exit 0

sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null || { echo "deps.sh: not root and no sudo; cannot install ${need[*]}" >&2; exit 1; }
	sudo=sudo
fi
echo "deps.sh: installing ${need[*]} from Debian's packages" >&2
$sudo apt-get update -qq
$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
