#!/usr/bin/env bash
# Throughput groups, live: `make demo`.
#
# Uses the ZooKeeper servers in COORD_ZK (comma-separated, as the sidecar takes
# them) when it is set; otherwise starts a ZooKeeper of its own on a free port.
# Then starts two sidecars, A and B, on free ports under a fresh --zk-root, and
# replays the scenario of issue 5 with curl: limit 1000, members m1..m5 joining on
# either sidecar each under a lease of its own, leases revoked, the limit lowered,
# and finally sidecar B killed with SIGKILL. After every step it prints each
# member's role and share. The sidecars, and the ZooKeeper it started, are stopped
# on exit; a ZooKeeper named by COORD_ZK is left as it was (but for the demo's
# --zk-root in it).
#
# Needs curl and jq. BIN overrides the sidecar binary (default bin/coord-sidecar).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BIN:-$ROOT/bin/coord-sidecar}"
GROUP=api-calls
ZKROOT="/coord-demo/run-$(date +%s)-$$"
LOGDIR="$(mktemp -d -t coord-demo.XXXXXX)"

for tool in curl jq; do
	command -v "$tool" >/dev/null || { echo "demo.sh: $tool is required" >&2; exit 1; }
done
if [ ! -x "$BIN" ]; then
	(cd "$ROOT" && go build -o "$BIN" ./cmd/coord-sidecar)
fi

declare -A PID URL   # sidecar name → pid, base URL
declare -A WHERE LEASE # member → sidecar name, lease id
ORDER=()               # members in join order (as the demo made them)

cleanup() {
	for name in "${!PID[@]}"; do
		kill "${PID[$name]}" 2>/dev/null || true
	done
	for name in "${!PID[@]}"; do
		wait "${PID[$name]}" 2>/dev/null || true
	done
	if [ -z "${COORD_ZK:-}" ]; then
		"$ROOT/scripts/zookeeper.sh" stop "$LOGDIR/zk" || true
	fi
	rm -rf "$LOGDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# free_port prints a TCP port nobody listens on.
free_port() {
	local port
	for port in $(shuf -i 20000-32000 -n 100); do # below Linux's ephemeral ports, which clients take
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			echo "$port"
			return 0
		fi
	done
	echo "demo.sh: no free port found" >&2
	exit 1
}

start_sidecar() {
	local name=$1 port
	port="$(free_port)"
	"$BIN" --listen "127.0.0.1:$port" --zk "$ZK" --zk-root "$ZKROOT" \
		--session-timeout 4s --log-level warn >"$LOGDIR/$name.log" 2>&1 &
	PID[$name]=$!
	URL[$name]="http://127.0.0.1:$port"
	for _ in $(seq 300); do
		if curl -fs "${URL[$name]}/readyz" >/dev/null 2>&1; then
			echo "sidecar $name: ${URL[$name]} (pid ${PID[$name]})"
			return 0
		fi
		sleep 0.1
	done
	echo "demo.sh: sidecar $name did not become ready; its log:" >&2
	cat "$LOGDIR/$name.log" >&2
	exit 1
}

# run prints a curl command line (as a user would type it, the sidecar's URL
# shown as $A or $B) and its answer.
run() {
	local line="curl -s" arg out unsafe='[^A-Za-z0-9_./:=-]'
	for arg in "$@"; do
		if [[ "$arg" == "${URL[$CAR]}"* ]]; then
			arg="\"\$$CAR${arg#"${URL[$CAR]}"}\""
		elif [[ "$arg" =~ $unsafe ]]; then
			arg="'$arg'"
		fi
		line+=" $arg"
	done
	echo "\$ $line"
	out="$(curl -s "$@")" || true
	printf '%s\n' "$out"
}

# version prints the group's allocation version as sidecar A sees it.
version() { curl -s "${URL[A]}/v1/throughput/$GROUP" | jq -r .version; }

# await_change VERSION: long-polls a live member until the allocation changes.
await_change() {
	local v=$1 m
	for m in "${ORDER[@]}"; do
		if [ -n "${WHERE[$m]:-}" ] && [ -n "${PID[${WHERE[$m]}]:-}" ]; then
			curl -s "${URL[${WHERE[$m]}]}/v1/throughput/$GROUP/members/$m?version=$v&wait=15s" >/dev/null
			return 0
		fi
	done
}

# table STEP: each member's sidecar, role and share as GET on sidecar A answers.
table() {
	local body
	body="$(curl -s "${URL[A]}/v1/throughput/$GROUP")"
	printf '\n== %s ==  limit %s, version %s, leader %s\n' "$1" \
		"$(jq -r .limit <<<"$body")" "$(jq -r .version <<<"$body")" "$(jq -r '.leader // "none"' <<<"$body")"
	printf '   %-7s %-8s %-7s %7s %7s\n' member sidecar role weight share
	local id weight share leader
	while IFS=$'\t' read -r id weight share leader; do
		[ -n "$id" ] || continue
		local role=member
		[ "$leader" = true ] && role=leader
		printf '   %-7s %-8s %-7s %7s %7s\n' "$id" "${WHERE[$id]:-?}" "$role" "$weight" "$share"
	done < <(jq -r '.members[] | [.id, .weight, .share, .leader] | @tsv' <<<"$body")
	echo
}

join() {
	local id=$1 car=$2 lease
	CAR=$car
	lease="$(curl -s -X POST "${URL[$car]}/v1/leases?ttl=5m" | jq -r .lease)"
	run -X POST "${URL[$car]}/v1/throughput/$GROUP/members?id=$id&lease=$lease"
	WHERE[$id]=$car
	LEASE[$id]=$lease
	ORDER+=("$id")
	table "$id joins on sidecar $car"
}

revoke() {
	local id=$1 v
	CAR=${WHERE[$id]}
	v="$(version)"
	run -X DELETE "${URL[$CAR]}/v1/leases/${LEASE[$id]}" -w '%{http_code}'
	unset "WHERE[$id]"
	await_change "$v"
	table "$id's lease revoked"
}

if [ -n "${COORD_ZK:-}" ]; then
	ZK=$COORD_ZK
	echo "ZooKeeper: $ZK (COORD_ZK)"
else
	zkport="$(free_port)"
	"$ROOT/scripts/zookeeper.sh" start "$LOGDIR/zk" "$zkport"
	ZK=127.0.0.1:$zkport
fi
start_sidecar A
start_sidecar B
echo "A=${URL[A]} B=${URL[B]}; group $GROUP under --zk-root $ZKROOT"

CAR=A
run -X PUT "${URL[A]}/v1/throughput/$GROUP" -H 'Content-Type: application/json' -d '{"limit":1000}'
table "limit set to 1000"
join m1 A
join m2 B
join m3 A
join m4 B
revoke m1
revoke m4
CAR=A
run -X PUT "${URL[A]}/v1/throughput/$GROUP" -H 'Content-Type: application/json' -d '{"limit":500}'
table "limit set to 500"
join m5 B

CAR=A
echo "A member's long-poll answers when the allocation changes (here: B is killed next):"
v="$(version)"
start=$(date +%s%N)
kill -9 "${PID[B]}"
wait "${PID[B]}" 2>/dev/null || true
unset "PID[B]"
run "${URL[A]}/v1/throughput/$GROUP/members/m3?version=$v&wait=30s"
echo "sidecar B (m2, the leader, and m5) killed with SIGKILL; m3 took over after $((($(date +%s%N) - start) / 1000000)) ms (session timeout 4s)"
unset "WHERE[m2]" "WHERE[m5]"
table "sidecar B killed"

echo "A new subscriber first gets the current allocation and leader:"
run "${URL[A]}/v1/throughput/$GROUP/events" --max-time 1
