#!/usr/bin/env bash
# The sidecar against its floor, layer by layer (issue 41): one scripts/bench.sh
# run with both servers' Go profiles on (BENCH_PPROF, BENCH_FLOOR_PPROF), a CPU
# profile of each taken over the same window once ZooKeeper is warmed up, and
# each profile's time divided by the lock cycles its server answered in that
# window (the sidecar's coord_http_requests_total for route "DELETE /v1/locks/{name}",
# 204, the floor's "cycles" at /debug/vars). Prints, for each layer of the
# request path, the µs of CPU per cycle in both servers (cumulative: a layer
# includes what it calls) and the difference, then the functions whose own
# (flat) time per cycle differs most.
#
#   scripts/bench-profile.sh [SECONDS] [bench.sh flags...]
#   scripts/bench-profile.sh -analyze DIR      (the tables again from DIR)
#   e.g. scripts/bench-profile.sh 40 -rows c64 -rounds 20 -engines sidecar,floor -fifo 0 -latency 0
#
# SECONDS (default 40) must end before the row does: with two engines, a row
# lasts about 2 x rounds x 2 s plus the warm-ups. The profiles, the binaries
# and the bench's output stay in BENCH_PROFILE_DIR (default a new temporary
# folder), for `go tool pprof` (e.g. -diff_base floor.pb sidecar.pb, whose
# figures are per profile, not per cycle: divide by the cycles printed here).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
measure() {
	# shellcheck source=scripts/bench-lib.sh
	source scripts/bench-lib.sh
	freeport SPP
	freeport FPP
	SP="127.0.0.1:$SPP"
	FP="127.0.0.1:$FPP"

	BENCH_PPROF=$SP BENCH_FLOOR_PPROF=$FP scripts/bench.sh "$@" >"$OUT/bench.md" 2>"$OUT/bench.err" &
	BENCH=$!
	trap 'kill $BENCH 2>/dev/null || true' EXIT
	until grep -q "warmed up" "$OUT/bench.err" 2>/dev/null; do
		kill -0 $BENCH 2>/dev/null || { cat "$OUT/bench.err" >&2; exit 1; }
		sleep 1
	done
	SC=$(sed -n 's/.*sidecar pid [0-9]* :\([0-9]*\),.*/\1/p' "$OUT/bench.err" | head -1)
	FLOOR_PID=$(sed -n 's/.*floor pid \([0-9]*\) .*/\1/p' "$OUT/bench.err" | head -1)
	SIDECAR_PID=$(sed -n 's/.*, sidecar pid \([0-9]*\) .*/\1/p' "$OUT/bench.err" | head -1)
	cp "/proc/$SIDECAR_PID/exe" "$OUT/coord-sidecar" 2>/dev/null || cp bin/coord-sidecar "$OUT/coord-sidecar"
	cp "/proc/$FLOOR_PID/exe" "$OUT/coord-bench" 2>/dev/null || cp bin/coord-bench "$OUT/coord-bench"

	sidecar_cycles() {
		curl -sf "http://127.0.0.1:$SC/metrics" |
			awk 'index($0, "coord_http_requests_total{") == 1 && index($0, "route=\"DELETE /v1/locks/{name}\"") && index($0, "code=\"204\"") {n += $NF} END {printf "%d\n", n}'
	}
	floor_cycles() { curl -sf "http://$FP/debug/vars" | sed -n 's/.*"cycles": *\([0-9]*\).*/\1/p'; }

	s0=$(sidecar_cycles); f0=$(floor_cycles)
	curl -sf -o "$OUT/sidecar.pb" "http://$SP/debug/pprof/profile?seconds=$SECS" &
	c1=$!
	curl -sf -o "$OUT/floor.pb" "http://$FP/debug/pprof/profile?seconds=$SECS" &
	c2=$!
	wait $c1 $c2
	s1=$(sidecar_cycles); f1=$(floor_cycles)
	SN=$((s1 - s0)); FN=$((f1 - f0))
	wait $BENCH || true
	trap - EXIT
	cat "$OUT/bench.md"
	echo
	echo "Profiles of ${SECS}s in $OUT: the sidecar answered $SN cycles, the floor $FN."
	echo "$SN $FN" >"$OUT/cycles"
}

SECS=40
if [ "${1:-}" = -analyze ]; then
	# -analyze DIR: the tables again from a folder this script filled.
	OUT=$2
	read -r SN FN <"$OUT/cycles"
else
	if [[ "${1:-}" =~ ^[0-9]+$ ]]; then SECS=$1; shift; fi
	[ $# -gt 0 ] || set -- -rows c64 -rounds 20 -engines sidecar,floor -fifo 0 -latency 0
	OUT="${BENCH_PROFILE_DIR:-$(mktemp -d /tmp/bench-profile-XXXXXX)}"
	mkdir -p "$OUT"
	measure "$@"
fi

# top NAME BINARY PROFILE CYCLES MODE: "function<TAB>µs per cycle" (MODE cum or flat).
top() {
	local sort=""
	[ "$4" = cum ] && sort=-cum
	go tool pprof -top $sort -nodecount=100000 -unit=ms "$1" "$2" 2>/dev/null |
		awk -v n="$3" -v mode="$4" '
			$1 ~ /^[0-9.]+(ms)?$/ && $2 ~ /%$/ && NF >= 6 {
				f = $1; c = $4; sub(/ms$/, "", f); sub(/ms$/, "", c)
				name = $6; for (i = 7; i <= NF; i++) name = name " " $i
				printf "%s\t%.2f\n", name, (mode == "cum" ? c : f) * 1000 / n
			}'
}
top "$OUT/coord-sidecar" "$OUT/sidecar.pb" "$SN" cum >"$OUT/sidecar.cum"
top "$OUT/coord-bench" "$OUT/floor.pb" "$FN" cum >"$OUT/floor.cum"
top "$OUT/coord-sidecar" "$OUT/sidecar.pb" "$SN" flat >"$OUT/sidecar.flat"
top "$OUT/coord-bench" "$OUT/floor.pb" "$FN" flat >"$OUT/floor.flat"

total() { go tool pprof -top -nodecount=1 "$1" "$2" 2>/dev/null | sed -n 's/.*Total samples = \([0-9.]*\)\(m\?s\).*/\1 \2/p' |
	awk -v n="$3" '{v = $1; if ($2 == "s") v *= 1000; printf "%.1f", v * 1000 / n}'; }
echo
echo "µs of CPU per cycle, all samples: sidecar $(total "$OUT/coord-sidecar" "$OUT/sidecar.pb" "$SN"), floor $(total "$OUT/coord-bench" "$OUT/floor.pb" "$FN")"
echo
echo "Layers (cumulative µs per cycle; a layer includes the ones below it):"
printf '%-58s %9s %9s %9s\n' layer sidecar floor diff
while IFS='|' read -r label pat; do
	s=$(PAT=$pat awk -F'\t' '$1 ~ ENVIRON["PAT"] {v += $2} END {printf "%.1f", v}' "$OUT/sidecar.cum")
	f=$(PAT=$pat awk -F'\t' '$1 ~ ENVIRON["PAT"] {v += $2} END {printf "%.1f", v}' "$OUT/floor.cum")
	printf '%-58s %9s %9s %9.1f\n' "$label" "$s" "$f" "$(echo "$s - $f" | bc)"
done <<'LAYERS'
net/http connection (read, serve, write, flush)|^net/http\.\(\*conn\)\.serve$
  reading the request|^net/http\.\(\*conn\)\.readRequest$
  the handler (everything under net/http)|^net/http\.serverHandler\.ServeHTTP$
  finishing the answer (flush, write(2))|^net/http\.\(\*response\)\.finishRequest$
  net/http's background read|^net/http\.\(\*connReader\)\.backgroundRead$
ZooKeeper client (go-zookeeper send and receive loops)|^github\.com/go-zookeeper/zk\.\(\*Conn\)\.(sendLoop|recvLoop)$
garbage collector (background mark workers)|^runtime\.gcBgMarkWorker$
allocation (mallocgc, everywhere)|^runtime\.mallocgc$
scheduler (findRunnable)|^runtime\.findRunnable$
LAYERS
echo
echo "Functions whose own time per cycle differs most (µs, sidecar - floor):"
join -t$'\t' -a1 -a2 -e 0 -o 0,1.2,2.2 <(sort -t$'\t' -k1,1 "$OUT/sidecar.flat") <(sort -t$'\t' -k1,1 "$OUT/floor.flat") |
	awk -F'\t' '{d = $2 - $3; printf "%.2f\t%.2f\t%.2f\t%s\n", d, $2, $3, $1}' | sort -t$'\t' -k1,1gr | head -25 |
	awk -F'\t' 'BEGIN {printf "%8s %8s %8s  %s\n", "diff", "sidecar", "floor", "function"} {printf "%8s %8s %8s  %s\n", $1, $2, $3, $4}'
