#!/usr/bin/env bash
# The fleet benchmark of issue 26 (docs/BENCHMARKS.md, "A fleet of sidecars"):
# the sidecar as it is deployed, one process per application replica, each with
# one client. It starts a 3-node ZooKeeper ensemble (scripts/zookeeper.sh
# start-ensemble: fsync on, as users run it) and BENCH_FLEET sidecar processes
# (64 by default) on it, all with the same --zk-root, then runs bin/coord-bench
# -fleet from a process of its own: the fleet at rest, a hot lock handed
# through the first N sidecars (N = 16 and 64; with and without a hold time)
# against go-zookeeper's zk.Lock on N sessions in the load's process, on the
# same ensemble in the same run, then an election's failover on every
# sidecar's stream, ending with the leader's sidecar killed. Every server runs
# on free ports of 127.0.0.1 with its data in a temporary folder on disk, and
# is stopped at the end. Prints markdown for docs/BENCHMARKS.md.
#
#   scripts/bench-fleet.sh [coord-bench flags...]   e.g. -fleet-sizes 16 -rounds 3 -zk-warmup 10s
#
# BENCH_FLEET=N starts N sidecars; BENCH_SIDECAR=PATH runs that sidecar binary
# instead of building this tree's; BENCH_KEEP=1 keeps the folder with the logs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/bench-lib.sh
source scripts/bench-lib.sh

FLEET="${BENCH_FLEET:-64}"
SESSION_TIMEOUT=10s # the sidecar's default, written out: the kill's failover is bounded by it

scripts/zookeeper.sh install
SIDECAR="${BENCH_SIDECAR:-bin/coord-sidecar}"
[ -n "${BENCH_SIDECAR:-}" ] || CGO_ENABLED=0 go build -o bin/coord-sidecar ./cmd/coord-sidecar # as make build
go build -o bin/coord-bench ./cmd/coord-bench

DIR="$(mktemp -d "${TMPDIR:-/tmp}/coord-fleet-XXXXXX")"
PIDS=() URLS=()
# cleanup stops every server of this run (never failing half-way: a killed
# process's wait status is not 0).
cleanup() {
	set +e
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null; done
	scripts/zookeeper.sh stop-ensemble "$DIR/zk" >/dev/null
	if [ -n "${BENCH_KEEP:-}" ]; then echo "bench-fleet.sh: logs kept in $DIR" >&2; else rm -rf "$DIR"; fi
}
trap cleanup EXIT

# The ensemble takes BASE..BASE+22; a port found free may be taken by another
# program before a server binds it: try another base then.
for try in 1 2 3 4 5; do
	freeport BASE
	BASE=$((BASE / 100 * 100))
	scripts/zookeeper.sh start-ensemble "$DIR/zk" "$BASE" >&2 && break
	[ "$try" -lt 5 ] || { echo "bench-fleet.sh: the ensemble did not start" >&2; exit 1; }
	rm -rf "$DIR/zk"
done
ZKS="127.0.0.1:$BASE,127.0.0.1:$((BASE + 1)),127.0.0.1:$((BASE + 2))"
ZK_PIDS="$(cat "$DIR"/zk/{1,2,3}/zookeeper.pid | paste -sd+)"
for p in $BASE $((BASE + 1)) $((BASE + 2)) $((BASE + 10)) $((BASE + 11)) $((BASE + 12)) $((BASE + 20)) $((BASE + 21)) $((BASE + 22)); do
	taken[$p]=1
done

for i in $(seq 0 $((FLEET - 1))); do
	freeport port
	"$SIDECAR" --zk "$ZKS" --listen "127.0.0.1:$port" --zk-root /coord-fleet \
		--session-timeout "$SESSION_TIMEOUT" >"$DIR/sidecar-$i.log" 2>&1 &
	PIDS+=("$!")
	URLS+=("http://127.0.0.1:$port")
done
for u in "${URLS[@]}"; do waitfor curl -sf "$u/readyz"; done

echo "bench-fleet.sh: ensemble $ZKS (pids $ZK_PIDS), $FLEET sidecars ready" >&2
bin/coord-bench -fleet "$(IFS=,; echo "${URLS[*]}")" -fleet-pids "$(IFS=,; echo "${PIDS[*]}")" \
	-fleet-kill -fleet-session-timeout "$SESSION_TIMEOUT" -fleet-zk-root /coord-fleet \
	-zk "$ZKS" -pids "zookeeper=$ZK_PIDS" "$@"
