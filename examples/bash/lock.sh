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
# Environment: COORD_ADDR (default http://127.0.0.1:8080), WAIT (10s), TTL (the
# lease's time to live in seconds, at least 3; default 30), OWNER (shown as the
# lock's holder; default host:pid). Needs bash and curl, nothing else.
set -euo pipefail

# COORD_ADDR is a URL (http://HOST:PORT, https://HOST:PORT), HOST:PORT (plain
# http) or unix:/PATH (a unix socket). Every curl below gets "${via[@]}": nothing
# over TCP, --unix-socket PATH for a socket (then the URL is http://localhost).
addr=${COORD_ADDR:-http://127.0.0.1:8080} via=()
case $addr in
unix:*)
	socket=${addr#unix:}
	socket=${socket#//} # unix:///run/coord.sock
	via=(--unix-socket "$socket") addr=http://localhost
	[ -n "$socket" ] || addr=""
	;;
http://?* | https://?*) ;;
*://* | */* | *[?#]*) addr="" ;;
:[0-9]*) addr=http://127.0.0.1$addr ;;
?*:[0-9]*) addr=http://$addr ;;
*) addr="" ;;
esac
if [ -z "$addr" ]; then
	echo "lock.sh: COORD_ADDR=${COORD_ADDR-}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH" >&2
	exit 1
fi
addr=${addr%/}

lock=${1:?usage: lock.sh LOCK [COMMAND [ARG]...]}
shift
[ $# -gt 0 ] || set -- sh -c 'echo "working with fencing token $FENCING_TOKEN"; sleep 2'
ttl=${TTL:-30}

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
	curl "${via[@]}" -sS --fail-with-body -X DELETE "$addr/v1/locks/$lock?lease=$lease" >&2 && echo released
}
keepalive="" work=""
trap release EXIT
trap 'exit 130' INT TERM

# 2. Work, with the token in the environment: pass it to whatever the lock protects,
#    which refuses tokens lower than the highest it has seen. Meanwhile keep the
#    lease alive every TTL/3 seconds; if that fails the lock is no longer ours, so
#    stop the work. (<&0: a background command would otherwise read /dev/null;
#    the sleep that outlives the loop for a while holds none of our output.)
FENCING_TOKEN=$token "$@" <&0 &
work=$!
while sleep $((ttl / 3)) 2>/dev/null; do
	curl "${via[@]}" -sf -X POST "$addr/v1/leases/$lease/keepalive" >/dev/null && continue
	echo "lock.sh: lease $lease lost; stopping the work" >&2
	kill "$work"
	break
done </dev/null >/dev/null &
keepalive=$!
disown "$keepalive" # killed with SIGKILL at the end: bash is not to report it on stderr
status=0
wait "$work" || status=$?
exit "$status"
