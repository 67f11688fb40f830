#!/usr/bin/env bash
# The lock benchmark as users run the sidecar (docs/BENCHMARKS.md): ZooKeeper
# with its defaults (fsync on), the sidecar as a process of its own, etcd 3.4
# (Debian's etcd-server) with its defaults, and the load from a third process,
# bin/coord-bench, which also runs go-zookeeper's zk.Lock in-process. A second
# sidecar process, on the same ZooKeeper with its own --zk-root, runs with
# --state-dir (issue 23): its column ("stated") puts the lock rows with a state
# directory beside those without, in the same run. The floor (issue 41:
# `coord-bench -serve-floor`, a bare net/http+chi server over one go-zookeeper
# session making the lock cycle's ZooKeeper requests and nothing else) runs as
# a process of its own too, its column ("floor") the reference of the
# sidecar's CPU per cycle. Every
# server runs on free ports of 127.0.0.1 with its data in a temporary folder
# on disk, and is stopped at the end. Prints markdown for docs/BENCHMARKS.md.
#
#   scripts/bench.sh [coord-bench flags...]    e.g. -rows c1,hot -rounds 3
#
# BENCH_SIDECAR=PATH runs that sidecar binary instead of building this tree's
# (to compare two commits in one run's conditions); BENCH_PPROF=127.0.0.1:6060 serves the sidecar's Go profiles there meanwhile
# (COORD_PPROF), BENCH_FLOOR_PPROF=127.0.0.1:6061 the floor's (with its cycle count
# at /debug/vars; scripts/bench-profile.sh takes both in one run); BENCH_KEEP=1 keeps the folder with the servers' logs;
# BENCH_AA=1 runs the "stated" process without --state-dir, so that its column
# measures how far two identical sidecar processes differ in one run (the
# comparison's own noise); with BENCH_AA_SIDECAR=PATH too, that process runs
# that build instead: two builds side by side in one run (-engines
# sidecar,stated,floor), this tree's as "sidecar", PATH's as "stated".
# BENCH_STRESS=N runs `stress-ng --cpu N` beside the whole run (a busy
# machine: issue 41's targets hold quiet and under `--cpu 1`), installing
# Debian's stress-ng if missing.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# install_pkg installs a Debian package for the command it names, if missing.
install_pkg() {
	command -v "$1" >/dev/null && return 0
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null || { echo "bench.sh: not root and no sudo; cannot install $2" >&2; exit 1; }
		sudo=sudo
	fi
	echo "bench.sh: installing Debian package $2" >&2
	$sudo apt-get update -qq
	# The package's service is not wanted (policy-rc.d may refuse it anyway).
	$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
	command -v "$1" >/dev/null || { echo "bench.sh: $1 still missing after installing $2" >&2; exit 1; }
}


# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh

scripts/zookeeper.sh install
install_pkg etcd etcd-server
[ -z "${BENCH_STRESS:-}" ] || install_pkg stress-ng stress-ng
SIDECAR="${BENCH_SIDECAR:-bin/coord-sidecar}"
[ -n "${BENCH_SIDECAR:-}" ] || CGO_ENABLED=0 go build -o bin/coord-sidecar ./cmd/coord-sidecar # as make build
go build -o bin/coord-bench ./cmd/coord-bench

DIR="$(mktemp -d "${TMPDIR:-/tmp}/coord-bench-XXXXXX")"
SIDECAR_PID="" STATED_PID="" FLOOR_PID="" ETCD_PID="" STRESS_PID=""
# cleanup stops every server of this run (never failing half-way: errexit is
# off here, since a killed server's wait status is not 0).
cleanup() {
	set +e
	for pid in $STRESS_PID $SIDECAR_PID $STATED_PID $FLOOR_PID $ETCD_PID; do
		kill "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	scripts/zookeeper.sh stop "$DIR/zk" >/dev/null
	if [ -n "${BENCH_KEEP:-}" ]; then echo "bench.sh: logs kept in $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

# A port found free may be taken by another program before ZooKeeper binds it
# (other test suites run on this machine): try another one then.
for try in 1 2 3 4 5; do
	freeport ZK_PORT
	scripts/zookeeper.sh start "$DIR/zk" "$ZK_PORT" >&2 && break
	[ "$try" -lt 5 ] || { echo "bench.sh: ZooKeeper did not start" >&2; exit 1; }
	rm -rf "$DIR/zk"
done
ZK_PID="$(cat "$DIR/zk/zookeeper.pid")"

freeport ETCD_PORT
freeport ETCD_PEER
etcd --name bench --data-dir "$DIR/etcd" \
	--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
	--listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
	--initial-cluster "bench=http://127.0.0.1:$ETCD_PEER" >"$DIR/etcd.log" 2>&1 &
ETCD_PID=$!
waitfor curl -sf "http://127.0.0.1:$ETCD_PORT/health"

freeport SC_PORT
COORD_PPROF="${BENCH_PPROF:-}" "$SIDECAR" --zk "127.0.0.1:$ZK_PORT" --listen "127.0.0.1:$SC_PORT" \
	--zk-root /coord-bench >"$DIR/sidecar.log" 2>&1 &
SIDECAR_PID=$!
waitfor curl -sf "http://127.0.0.1:$SC_PORT/readyz"

STATED_FLAGS=(--state-dir "$DIR/state")
[ -z "${BENCH_AA:-}" ] || STATED_FLAGS=()
# The same sidecar with a state directory (on the same disk as the servers'
# data), every other flag as the first one's.
freeport STATED_PORT
"${BENCH_AA_SIDECAR:-$SIDECAR}" --zk "127.0.0.1:$ZK_PORT" --listen "127.0.0.1:$STATED_PORT" \
	--zk-root /coord-bench-stated "${STATED_FLAGS[@]}" >"$DIR/sidecar-stated.log" 2>&1 &
STATED_PID=$!
waitfor curl -sf "http://127.0.0.1:$STATED_PORT/readyz"

# The floor, on the same ZooKeeper (its nodes under /coord-bench-floor). It
# serves only the lock routes: any answer (404 here) tells that it listens,
# which it does once its session is up.
freeport FLOOR_PORT
COORD_PPROF="${BENCH_FLOOR_PPROF:-}" bin/coord-bench -serve-floor "127.0.0.1:$FLOOR_PORT" -zk "127.0.0.1:$ZK_PORT" >"$DIR/floor.log" 2>&1 &
FLOOR_PID=$!
waitfor curl -s -o /dev/null "http://127.0.0.1:$FLOOR_PORT/"

if [ -n "${BENCH_STRESS:-}" ]; then
	stress-ng --cpu "$BENCH_STRESS" --quiet &
	STRESS_PID=$!
	echo "bench.sh: stress-ng --cpu $BENCH_STRESS beside the run (pid $STRESS_PID)" >&2
fi
echo "bench.sh: ZooKeeper pid $ZK_PID :$ZK_PORT, etcd pid $ETCD_PID :$ETCD_PORT, sidecar pid $SIDECAR_PID :$SC_PORT, sidecar with --state-dir pid $STATED_PID :$STATED_PORT, floor pid $FLOOR_PID :$FLOOR_PORT" >&2
bin/coord-bench -sidecar "http://127.0.0.1:$SC_PORT" -sidecar-stated "http://127.0.0.1:$STATED_PORT" \
	-floor "http://127.0.0.1:$FLOOR_PORT" -zk "127.0.0.1:$ZK_PORT" -etcd "http://127.0.0.1:$ETCD_PORT" \
	-pids "sidecar=$SIDECAR_PID,stated=$STATED_PID,floor=$FLOOR_PID,zookeeper=$ZK_PID,etcd=$ETCD_PID" "$@"
