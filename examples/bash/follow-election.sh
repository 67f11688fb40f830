#!/usr/bin/env bash
# Enrol in a leader election, then print every change of leader as it happens.
#
#   follow-election.sh ELECTION [ID]
#
# Prints "enrolled ID leader true|false term T", then one line per change of
# leader, the current one first: "leader CANDIDATE term T" ("leader none" while
# there is none). Stops after $EVENTS leader lines or $TIMEOUT seconds (0, the
# default for both: no limit), or on Ctrl-C. Leaving closes the lease's stream,
# which ends the candidacy at once: the next candidate leads.
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

# 2. Keep the candidacy's lease alive by holding its event stream open: the lease
#    does not expire while the stream is open, and is revoked when it closes.
#    (Its last event would say if the lease ended otherwise, taking the candidacy
#    with it; a script that acts as leader should watch for that, as the Python
#    and Node versions do.)
curl "${via[@]}" -sSN "$addr/v1/leases/$lease/events" >/dev/null &
lease_stream=$!
# 3. Follow the election: one `leader` event (data: the election, as GET
#    /v1/elections/ELECTION answers it) now, then one on every change.
exec 3< <(exec curl "${via[@]}" -sSN "$addr/v1/elections/$election/events")
election_stream=$!
trap 'kill $lease_stream $election_stream 2>/dev/null || true' EXIT
trap 'exit 130' INT TERM

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
