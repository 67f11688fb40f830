# Helpers of the benchmark scripts (sourced by scripts/bench.sh and
# scripts/bench-fleet.sh).

# taken: the ports freeport already gave out in this run.
declare -A taken=()

# freeport VAR: sets VAR to a port of 127.0.0.1 that nothing answers on and
# that this run has not given out yet (not in a subshell: it records the port).
freeport() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000)) # below Linux's ephemeral ports (32768-60999), which clients take
		[ -z "${taken[$p]:-}" ] || continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			taken[$p]=1
			printf -v "$1" %s "$p"
			return
		fi
	done
}

# waitfor CMD...: retries CMD for up to 30 s.
waitfor() {
	for _ in $(seq 300); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "$(basename "$0"): gave up waiting for: $*" >&2
	return 1
}
