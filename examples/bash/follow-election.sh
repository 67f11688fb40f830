#!/usr/bin/env bash
# Enrol in a leader election, then print every change of leader as it happens.
#
#   follow-election.sh ELECTION [ID]
#
# Prints "enrolled ID leader true|false term T", then one line per change of
# leader, the current one first: "leader CANDIDATE term T" ("leader none" while
# there is none). Stops after $EVENTS leader lines or $TIMEOUT seconds (0, the
# default for both: no limit), or on Ctrl-C. Leaving closes the lease's stream,
# which ends the candidacy at once: the next candidate leads. A restart of the
# sidecar costs nothing: its streams are opened again (see hold_lease, follow);
# the script exits 1 when the lease is gone.
#
# Environment: COORD_ADDR (default http://127.0.0.1:8080), VALUE (published with
# the candidate; default the host name), TTL (seconds, default 10), EVENTS,
# TIMEOUT. Needs bash and curl, nothing else.
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
	echo "follow-election.sh: COORD_ADDR=${COORD_ADDR-}: want http://HOST:PORT, https://HOST:PORT, HOST:PORT or unix:/PATH" >&2
	exit 1
fi
addr=${addr%/}

election=${1:?usage: follow-election.sh ELECTION [ID]}
id=${2:-candidate-$$}
events=${EVENTS:-0} timeout=${TIMEOUT:-0}
value=${VALUE:-$(hostname)}
value=${value//\\/\\\\} value=${value//\"/\\\"} # a JSON string

# 1. Enrol. The answer (201) is {"candidate","leader","lease","name","term"}.
if ! candidacy=$(curl "${via[@]}" -sS --fail-with-body -X POST "$addr/v1/elections/$election/candidates?id=$id&ttl=${TTL:-10}s" \
	-H 'Content-Type: application/json' -d "{\"value\":\"$value\"}"); then
	echo "follow-election.sh: could not enrol: $candidacy" >&2
	exit 1
fi
lease=$(sed -n 's/.*"lease":"\([^"]*\)".*/\1/p' <<<"$candidacy")
leader=$(sed -n 's/.*"leader":\([a-z]*\).*/\1/p' <<<"$candidacy")
term=$(sed -n 's/.*"term":\([0-9]*\).*/\1/p' <<<"$candidacy")
echo "enrolled $id leader $leader term $term"

# A restart of the sidecar (kill -USR2, or kill -9 and a successor on the same
# --state-dir) ends its streams: both are opened again (the lease's with
# Last-Event-ID) after 50 ms doubling to 1 s, each curl run so that the script's
# end (a SIGTERM to its loop) ends it too, and the candidacy goes on.
tmp=$(mktemp -d)

# now_ms is the time in milliseconds; nap sleeps $1 milliseconds.
now_ms() {
	local t=${EPOCHREALTIME/[.,]/}
	echo $((10#$t / 1000))
}
nap() { sleep "$(($1 / 1000)).$(printf %03d $(($1 % 1000)))"; }

# run_curl runs curl with the arguments given; a SIGTERM to the (sub)shell that
# runs it ends that curl too, and the shell.
run_curl() {
	curl "$@" &
	local c=$!
	trap 'kill $c 2>/dev/null; exit 143' TERM
	wait "$c"
}

# hold_lease keeps the lease alive by holding its event stream open, opening it
# again after a break. When the lease is gone (404, the stream's end event, or
# TTL seconds without reaching the sidecar) it says so and tells the script
# (SIGUSR1), which exits 1.
hold_lease() {
	local code id pause=50 since why
	since=$(now_ms)
	while :; do
		id=$(sed -n 's/^id: *//p' "$tmp/lease" 2>/dev/null | tail -n 1) || true
		run_curl "${via[@]}" -sN -o "$tmp/lease" -w '%{http_code}' ${id:+-H "Last-Event-ID: $id"} \
			"$addr/v1/leases/$lease/events" >"$tmp/code" || true
		code=$(<"$tmp/code")
		why=$(sed -n 's/^event: *\(lost\|expired\|revoked\)$/lease \1/p' "$tmp/lease" 2>/dev/null) || true
		case $code in
		200) since=$(now_ms) pause=50 ;; # it was open: broken now
		000 | 5?? | 429) ;;               # not reached, or restarting
		*) why=${why:-"GET /v1/leases/$lease/events: $code"} ;;
		esac
		if [ -z "$why" ] && [ $(($(now_ms) - since)) -gt $((${TTL:-10} * 1000)) ]; then
			why="the sidecar not reached for ${TTL:-10}s"
		fi
		[ -z "$why" ] || break
		nap "$pause"
		pause=$((pause >= 500 ? 1000 : pause * 2))
	done
	echo "follow-election.sh: the lease ended ($why)" >&2
	kill -USR1 $$
}

# follow writes the event stream at $addr$1 to stdout for good, opening it
# again after a break; it then starts with the state now.
follow() {
	local rc pause=50
	while :; do
		rc=0
		run_curl "${via[@]}" -sN --fail "$addr$1" || rc=$?
		case $rc in 0 | 18 | 56 | 92) pause=50 ;; esac # it was open: ended or broken now
		nap "$pause"
		pause=$((pause >= 500 ? 1000 : pause * 2))
	done
}

# 2. Keep the candidacy's lease alive by holding its event stream open: the lease
#    does not expire while the stream is open, and is revoked when it closes
#    (hold_lease: it ends the script when the lease ends otherwise, taking the
#    candidacy with it).
hold_lease </dev/null >/dev/null &
lease_stream=$!
# 3. Follow the election: one `leader` event (data: the election, as GET
#    /v1/elections/ELECTION answers it) now, then one on every change; after a
#    restart of the sidecar, the state now again (printed if it changed).
exec 3< <(follow "/v1/elections/$election/events")
election_stream=$!
trap 'kill $lease_stream $election_stream 2>/dev/null || true; rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM
trap 'exit 1' USR1

# next_line reads the stream's next line into $line; it fails once TIMEOUT has
# passed since the script started (SECONDS counts from there) or when the
# stream ends.
next_line() {
	if [ "$timeout" -eq 0 ]; then
		IFS= read -r line <&3
	else
		local left=$((timeout - SECONDS))
		[ "$left" -gt 0 ] && IFS= read -r -t "$left" line <&3
	fi
}

last="" printed=0
while next_line; do
	case $line in
	data:*)
		# {"candidates":[...],"leader":{"candidate":"c1","since":"...","term":21,"value":"..."},"name":"..."}
		# or "leader":null. (JSON escapes quotes inside values, so these patterns
		# cannot match inside a value.)
		candidate=$(sed -n 's/.*"leader":{"candidate":"\([^"]*\)".*/\1/p' <<<"$line")
		term=$(sed -n 's/.*"term":\([0-9]*\).*/\1/p' <<<"$line")
		now="leader ${candidate:-none}${candidate:+ term $term}"
		# An event also comes when only the line of candidates changed: skip those.
		if [ "$now" != "$last" ]; then
			echo "$now"
			last=$now printed=$((printed + 1))
			if [ "$events" -gt 0 ] && [ "$printed" -ge "$events" ]; then
				exit 0
			fi
		fi
		;;
	esac
done
if [ "$timeout" -gt 0 ] && [ "$SECONDS" -ge "$timeout" ]; then
	exit 0 # TIMEOUT passed
fi
echo "follow-election.sh: the event stream ended" >&2
exit 1
