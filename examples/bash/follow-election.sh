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
# TIMEOUT. Needs bash and curl, and coord.sh
# beside it.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/coord.sh" # the address; the lease and event streams, followed

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
