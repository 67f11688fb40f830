#!/usr/bin/env bash
# Run a command while holding a coord-sidecar lock, with the lock's fencing token.
#
#   lock.sh LOCK [COMMAND [ARG]...]
#
# Takes LOCK (waiting up to $WAIT for it), prints "token N", runs COMMAND with
# FENCING_TOKEN=N in its environment while keeping the lock's lease alive, then
# releases the lock and prints "released". Exits with COMMAND's status, or 1 when
# the lock could not be taken. Without COMMAND it prints a line and sleeps 2s.
#
# A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
# --state-dir) costs nothing: a keepalive that finds the sidecar away is tried
# again after 50 ms doubling to 1 s. COMMAND is stopped only when the sidecar
# says the lease is gone (404), or when no keepalive was answered for as long as
# the lease could outlive it: TTL, or half the sidecar's ZooKeeper session
# timeout (a sidecar gone for good lets its session, and the lock, expire then).
#
# Environment: COORD_ADDR (default http://127.0.0.1:8080), WAIT (10s), TTL (the
# lease's time to live in seconds, at least 3; default 30), OWNER (shown as the
# lock's holder; default host:pid). Needs bash and curl, and coord.sh beside it.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/coord.sh" # the address (addr, via), now_ms, nap

lock=${1:?usage: lock.sh LOCK [COMMAND [ARG]...]}
shift
[ $# -gt 0 ] || set -- sh -c 'echo "working with fencing token $FENCING_TOKEN"; sleep 2'
ttl=${TTL:-30}

# period is how long an answered keepalive vouches for the lease, in
# milliseconds: TTL, or half the sidecar's ZooKeeper session timeout (a Go
# duration: 10s, 1m30s, 500ms; a fraction of a second is dropped) if shorter.
period=$((ttl * 1000))
timeout=$(curl "${via[@]}" -sS --fail "$addr/v1/session" | sed -n 's/.*"timeout":"\([^"]*\)".*/\1/p') || true
if [[ $timeout =~ ^(([0-9]+)m)?(([0-9]+)(\.[0-9]+)?s)?$ ]]; then
	half=$(((10#${BASH_REMATCH[2]:-0} * 60000 + 10#${BASH_REMATCH[4]:-0} * 1000) / 2))
elif [[ $timeout =~ ^([0-9]+)ms$ ]]; then
	half=$((10#${BASH_REMATCH[1]} / 2))
fi
if [ "${half:-0}" -gt 0 ] && [ "$half" -lt "$period" ]; then
	period=$half
fi

# 1. Acquire. Without lease= the sidecar makes an implicit lease from ttl=, which
#    ends with the release. -G puts the url-encoded fields in the query string.
#    The answer (201) is {"acquiredAt","fencingToken","lease","name","owner"}; a
#    refusal (409 lock-held after WAIT, or any other problem) goes to stderr.
if ! grant=$(curl "${via[@]}" -sS --fail-with-body -X POST -G "$addr/v1/locks/$lock" \
	--data-urlencode "wait=${WAIT:-10s}" --data-urlencode "ttl=${ttl}s" \
	--data-urlencode "owner=${OWNER:-$(hostname):$$}"); then
	echo "lock.sh: could not take $lock: $grant" >&2
	exit 1
fi
token=$(sed -n 's/.*"fencingToken":\([0-9]*\).*/\1/p' <<<"$grant")
lease=$(sed -n 's/.*"lease":"\([^"]*\)".*/\1/p' <<<"$grant")
echo "token $token"

# 3. (on every way out) Stop the keepalive loop and the work, release the lock.
#    Once, and only by this shell. The keepalive loop gets SIGKILL, not SIGTERM:
#    a background shell signalled just after its fork still runs the traps it
#    inherited (ours: exit, then this release) before bash resets them, and with
#    a quick command the loop is only microseconds old when we get here.
released=""
release() {
	[ "$BASHPID" = "$$" ] && [ -z "$released" ] || return 0
	released=1
	[ -z "$keepalive" ] || kill -KILL "$keepalive" 2>/dev/null || true
	[ -z "$work" ] || kill "$work" 2>/dev/null || true
	curl "${via[@]}" -sS --fail-with-body --retry 10 --retry-connrefused --retry-max-time 10 \
		-X DELETE "$addr/v1/locks/$lock?lease=$lease" >&2 && echo released
}
keepalive="" work=""
trap release EXIT
trap 'exit 130' INT TERM

# keep_alive keeps the lease alive, three keepalives per period, and stops the
# work when the lock may no longer be ours: the sidecar answers that the lease is
# gone (404), or no keepalive was answered for period since the last answered
# one was sent. A keepalive the sidecar does not answer (000: not reached; 5xx,
# 429: restarting or busy) is tried again after 50 ms doubling to 1 s.
keep_alive() {
	local confirmed left pause sent code backoff=0 why
	confirmed=$(now_ms)
	while :; do
		left=$((confirmed + period - $(now_ms)))
		if [ "$left" -le 0 ]; then
			why="no keepalive answered for ${period}ms"
			break
		fi
		pause=$((backoff > 0 ? backoff : period / 3))
		nap $((pause < left ? pause : left))
		sent=$(now_ms)
		code=$(curl "${via[@]}" -s -o /dev/null -w '%{http_code}' -m 5 -X POST "$addr/v1/leases/$lease/keepalive") || true
		case $code in
		200) confirmed=$sent backoff=0 ;;
		000 | 5?? | 429) backoff=$((backoff > 0 ? (backoff >= 500 ? 1000 : backoff * 2) : 50)) ;;
		*)
			why="keepalive answered $code"
			break
			;;
		esac
	done
	echo "lock.sh: lease $lease lost ($why); stopping the work" >&2
	kill "$work"
}

# 2. Work, with the token in the environment: pass it to whatever the lock protects,
#    which refuses tokens lower than the highest it has seen. Meanwhile keep the
#    lease alive (keep_alive). (<&0: a background command would otherwise read
#    /dev/null; the sleep that outlives the loop for a while holds none of our
#    output.)
FENCING_TOKEN=$token "$@" <&0 &
work=$!
keep_alive </dev/null >/dev/null &
keepalive=$!
disown "$keepalive" # killed with SIGKILL at the end: bash is not to report it on stderr
status=0
wait "$work" || status=$?
exit "$status"
